package toolcache

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
)

// maxJSONNesting is the deepest nesting of JSON objects and arrays that
// encoding/json decodes (its scanner's maxNestingDepth).
const maxJSONNesting = 10000

// errCodeAnswerTooDeep is the code of the error that replaces an answer
// nested deeper than maxJSONNesting.
const errCodeAnswerTooDeep = -32002

// nestBound is what mcp-go reads of a stdio server's stdout (after
// lineBound). mcp-go drops a line it cannot decode without a word, and
// encoding/json refuses one that nests deeper than maxJSONNesting: the
// request such a line answered waited for its deadline (a tools/list with
// one tool whose schema nests 10,000 levels: the server never connected,
// every attempt failing at the connect timeout with "context deadline
// exceeded"; a tools/call result nested so: the call's timeout). Such a
// line is dropped here from the point it nests too deep, and, when it
// answered a request, the request gets an error answer saying why, as a
// line over the size bound does (lineBound.droppedAnswer). The event
// streams of HTTP sessions are read through one too (sse): a legacy SSE
// session's request waited for its timeout the same way, a Streamable
// HTTP one failed with "unexpected nil response" (sseStreamWatch,
// nestStreams). An answer that is one JSON body is mcp-go's to refuse,
// which it does at once ("exceeded max depth").
type nestBound struct {
	r   io.Reader
	log *slog.Logger
	sse bool // r is an event stream: its messages are "data:" lines of events

	depth      int
	inStr, esc bool
	dropping   bool   // the rest of the current line is dropped
	head, tail []byte // the current line's start; the end of what was dropped
	pending    []byte // handed on before anything else
	unread     []byte // read from r, not yet looked at
	err        error  // r's, returned once pending and unread are handed on
}

// Close closes what d reads, if it can be closed (an SSE stream's body).
func (d *nestBound) Close() error {
	if c, ok := d.r.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func (d *nestBound) Read(p []byte) (int, error) {
	for {
		if len(d.pending) > 0 {
			n := copy(p, d.pending)
			d.pending = d.pending[n:]
			return n, nil
		}
		var n int
		switch {
		case len(d.unread) > 0:
			n = copy(p, d.unread)
			d.unread = d.unread[n:]
		case d.err != nil:
			return 0, d.err
		default:
			n, d.err = d.r.Read(p)
		}
		if w := d.filter(p[:n]); w > 0 {
			return w, nil
		}
	}
}

// filter follows the nesting of b, moving what is handed on to its start,
// and returns how much that is. At the end of a dropped line, the answer
// that replaces it goes to pending and what follows the line to unread.
func (d *nestBound) filter(b []byte) int {
	w := 0
	for i := 0; i < len(b); i++ {
		if d.dropping {
			j := bytes.IndexByte(b[i:], '\n')
			if j < 0 {
				d.keepTail(b[i:])
				return w
			}
			d.keepTail(b[i : i+j])
			// The newline ends the part mcp-go got (which it drops); in an
			// event stream a second one ends the event, so that the answer
			// is an event of its own.
			d.pending = []byte{'\n'}
			if d.sse {
				d.pending = append(d.pending, '\n')
			}
			d.pending = append(d.pending, d.answer()...)
			d.unread = append(append([]byte(nil), b[i+j+1:]...), d.unread...)
			d.dropping, d.depth, d.inStr, d.esc, d.head = false, 0, false, false, d.head[:0]
			return w
		}
		if d.inStr && !d.esc {
			// The bulk of a large message is in strings: move up to the
			// next byte that matters at once.
			k := bytes.IndexAny(b[i:], "\"\\\n")
			if k < 0 {
				k = len(b) - i
			}
			if k > 0 {
				d.keepHead(b[i : i+k])
				w += copy(b[w:], b[i:i+k])
				if i += k; i == len(b) {
					return w
				}
			}
		}
		c := b[i]
		switch {
		case c == '\n':
			d.depth, d.inStr, d.esc, d.head = 0, false, false, d.head[:0]
			b[w] = c
			w++
			continue
		case d.esc:
			d.esc = false
		case d.inStr:
			switch c {
			case '\\':
				d.esc = true
			case '"':
				d.inStr = false
			}
		case c == '"':
			d.inStr = true
		case c == '{' || c == '[':
			if d.depth++; d.depth > maxJSONNesting {
				d.dropping, d.tail = true, d.tail[:0]
				i-- // dropped from here
				continue
			}
		case c == '}' || c == ']':
			d.depth--
		}
		d.keepHead(b[i : i+1])
		b[w] = c
		w++
	}
	return w
}

// keepHead keeps p as part of the current line's start.
func (d *nestBound) keepHead(p []byte) {
	if room := lineHeadBytes - len(d.head); room > 0 {
		d.head = append(d.head, p[:min(len(p), room)]...)
	}
}

func (d *nestBound) keepTail(p []byte) {
	d.tail = append(d.tail, p[max(0, len(p)-lineTailBytes):]...)
	if len(d.tail) > lineTailBytes {
		d.tail = append(d.tail[:0], d.tail[len(d.tail)-lineTailBytes:]...)
	}
}

// answer is the error answer to the request a dropped line answered, if
// it answered one (see lineBound.droppedAnswer); nil otherwise.
func (d *nestBound) answer() []byte {
	head := d.head
	if d.sse {
		head = bytes.TrimPrefix(bytes.TrimPrefix(head, []byte("data:")), []byte(" "))
	}
	id, answer := headMembers(head)
	if id == "" {
		if m := tailID.FindSubmatch(d.tail); m != nil {
			id = string(m[1])
		}
	}
	if !answer || id == "" {
		d.log.Warn("MCP server wrote a message nested too deep to decode; dropped", "limit", maxJSONNesting)
		return nil
	}
	d.log.Warn("MCP server answered with a message nested too deep to decode; the request fails, the session goes on",
		"limit", maxJSONNesting, "request_id", id)
	msg := fmt.Sprintf("the server's answer nests JSON objects and arrays more than %d levels deep, "+
		"deeper than the client decodes, so it was dropped", maxJSONNesting)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id),
		"error": map[string]any{"code": errCodeAnswerTooDeep, "message": msg}})
	if d.sse {
		return append(append([]byte("event: message\ndata: "), b...), '\n', '\n')
	}
	return append(b, '\n')
}
