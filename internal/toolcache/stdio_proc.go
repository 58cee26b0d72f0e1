package toolcache

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/jetagent/jetagent/internal/redact"
)

// A stdio server's process is started here rather than by mcp-go, so that
// its stdout is read through a bound: mcp-go reads each line whole
// (bufio.Reader.ReadString), and a server that writes one endless line (a
// tool result of gigabytes, a server printing a binary file, garbage without
// a newline) grew the worker's memory until the machine killed it — and with
// it every job it ran, on every worker that picked the job up again. mcp-go
// is given the first maxMessageBytes of a longer line, and the rest is read
// and dropped up to its end: an answer is replaced by a JSON-RPC error for
// its request, and the session goes on (one job reading a large file broke
// the shared session, and the calls of every other job in flight on it). A
// line that does not end within maxSkippedBytes more breaks the session,
// and every call in flight fails with the reason.

// stdioProc is a started stdio server.
type stdioProc struct {
	cmd *exec.Cmd
	// stderr is the read end of the child's stderr (EOF once every process
	// holding it exited).
	stderr *os.File
	// stdout is the read end of its stdout, read by mcp-go.
	stdout *os.File
	// out is how mcp-go reads stdout (bounded, and sniffed for stray lines).
	out *lineBound
	// done is closed when cmd.Wait returned; waitErr is its error.
	done    chan struct{}
	waitErr error
}

// The graceful end of a stdio server (mcp-go's figures for the processes it
// starts): stdin closed, then SIGTERM, then SIGKILL.
const (
	stdioGraceful  = 2 * time.Second
	stdioForceKill = 3 * time.Second
)

// startStdio starts cfg's command on ctx (which kills it when it ends) and
// returns the transport that speaks to it, logging to logger. When the
// server writes a line over maxMessageBytes, tooLarge is set, onTooLarge
// runs, and reading stops there.
func startStdio(ctx context.Context, cfg ServerConfig, logger *slog.Logger, tooLarge *atomic.Bool, onTooLarge func()) (*transport.Stdio, *stdioProc, error) {
	cmd := exec.CommandContext(ctx, cfg.Command, cfg.Args...)
	cmd.Env = childEnv(envList(cfg.Env)) // never the worker's secrets: see childenv.go
	cmd.Dir = cfg.Cwd
	cmd.SysProcAttr = childProcAttr()
	// Pipes of our own (not cmd.StdoutPipe): Wait then does not close them
	// under a reader, so it can run as soon as the process starts.
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("stdin pipe: %w", err)
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("stderr pipe: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll()
		if cfg.Cwd != "" {
			// The child's chdir failing is reported as the command's own
			// error ("fork/exec /usr/bin/node: no such file or directory"),
			// which sent the operator looking for a program that is there.
			if fi, serr := os.Stat(cfg.Cwd); serr != nil {
				return nil, nil, fmt.Errorf("failed to start command: its cwd: %w", serr)
			} else if !fi.IsDir() {
				return nil, nil, fmt.Errorf("failed to start command: its cwd %q is not a directory", cfg.Cwd)
			}
		}
		return nil, nil, fmt.Errorf("failed to start command: %w", err)
	}
	// The child has its ends now.
	_ = inR.Close()
	_ = outW.Close()
	_ = errW.Close()
	p := &stdioProc{cmd: cmd, stderr: errR, stdout: outR, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	out := &lineBound{b: &limitedBody{ReadCloser: outR, left: maxMessageBytes, perLine: true, tooLarge: tooLarge}, onTooLarge: onTooLarge, log: logger,
		ended: make(chan struct{})}
	p.out = out
	// No logging reader: the session reads stderr itself (p.stderr), and
	// mcp-go's Close would otherwise close it under that reader.
	tr := transport.NewIO(&nestBound{r: out, log: logger}, inW, nil)
	transport.WithCommandLogger(logger)(tr)
	return tr, p, nil
}

// end waits for a child whose stdin was closed to exit: up to
// stdioGraceful, then SIGTERM and up to stdioForceKill, then SIGKILL to
// its process group. It returns how the process ended, or
// transport.ErrChildShutdownTimeout when it would not.
func (p *stdioProc) end() error {
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-p.done:
			return true
		case <-t.C:
			return false
		}
	}
	if wait(stdioGraceful) {
		return p.waitErr
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if wait(stdioForceKill) {
		return p.waitErr
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	if wait(stdioForceKill) {
		return p.waitErr
	}
	return transport.ErrChildShutdownTimeout
}

// lineBound reads a stdio server's stdout through limitedBody's per-line
// bound. Of a line over maxMessageBytes mcp-go gets that much and a newline
// (it drops the line, which is not valid JSON), the rest is dropped up to
// the line's end, and an answer to a request is followed by an error
// answer to it (see droppedAnswer). A line that goes on beyond
// maxSkippedBytes more ends the stream (io.EOF), after onTooLarge, which
// says why (mcp-go would log any other error as its own).
type lineBound struct {
	b          *limitedBody
	onTooLarge func()
	log        *slog.Logger
	// sse: the stream is a legacy SSE session's event stream, whose
	// messages are "data:" lines of events (see droppedAnswer); at the
	// bound of a dropped line it fails with errMessageTooLarge, which
	// mcp-go reports as the stream's loss.
	sse bool
	// skipOK, when set, says whether a line over the bound may be dropped
	// yet; while it says no, the read fails with errMessageTooLarge (an
	// SSE stream before its handshake is done: see sseStreamWatch).
	skipOK func() bool
	err    error
	// pending is served before anything else is read.
	pending []byte
	// head is the start of the current line (up to lineHeadBytes), which
	// says whether it answers a request and which; skipping is set while
	// the rest of a line over the bound is dropped (skipped bytes so far),
	// and tail keeps the end of what was dropped.
	head     []byte
	skipping bool
	skipped  int
	tail     []byte
	// The last line that was no JSON-RPC message (its start): mcp-go
	// drops such lines without a word, and a server that prints its usage
	// or a banner to stdout and exits, or then never answers, failed with
	// only "transport closed" or the connect timeout.
	mu         sync.Mutex
	midLine    bool // the last read ended inside a line
	inStray    bool // ... of a stray line, still being captured
	stray      []byte
	strayCount int
	// ended, when set, is closed once a read failed (stdout's end): the
	// handshake's error waits for it to quote what was written last.
	ended   chan struct{}
	endOnce sync.Once
}

// markEnded closes ended, once.
func (l *lineBound) markEnded() {
	if l.ended != nil {
		l.endOnce.Do(func() { close(l.ended) })
	}
}

// maxStray bounds what is kept of a stray stdout line.
const maxStray = 200

// sniff records the stray (non-JSON) lines of p.
func (l *lineBound) sniff(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(p) > 0 {
		if !l.midLine {
			start := bytes.TrimLeft(p, " \t\r")
			if len(start) == 0 {
				return // the line's first byte is in a later read
			}
			if start[0] == '\n' {
				p = start[1:]
				continue
			}
			p = start
			l.midLine, l.inStray = true, p[0] != '{' && p[0] != '['
			if l.inStray {
				l.stray, l.strayCount = l.stray[:0], l.strayCount+1
			}
		}
		end := bytes.IndexByte(p, '\n')
		line := p
		if end >= 0 {
			line = p[:end]
		}
		if l.inStray && len(l.stray) < maxStray {
			l.stray = append(l.stray, line[:min(len(line), maxStray-len(l.stray))]...)
		}
		if end < 0 {
			return
		}
		l.midLine, l.inStray = false, false
		p = p[end+1:]
	}
}

// strayHint quotes the last stray stdout line, for error messages.
func (l *lineBound) strayHint(secrets []string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.strayCount == 0 {
		return ""
	}
	// The line's start only is kept: a secret the cut went through is
	// masked by its part (redact.Window), which the pool's scrub of the
	// error, matching whole secrets, cannot find.
	line := redact.Window(string(l.stray), secrets, false, len(l.stray) >= maxStray)
	line = strings.ToValidUTF8(strings.TrimSpace(line), "\uFFFD")
	more := ""
	if l.strayCount > 1 {
		more = fmt.Sprintf(", the last of %d", l.strayCount)
	}
	return fmt.Sprintf(" (server stdout, not JSON-RPC%s: %q)", more, line)
}

// Bounds of dropping a line over maxMessageBytes.
const (
	// maxSkippedBytes is how much more of such a line is read and dropped
	// before the session is given up: a line that does not end is garbage
	// without end, and answers behind it would never come.
	maxSkippedBytes = 192 << 20
	// lineHeadBytes and lineTailBytes are what is kept of each line's start
	// and of a dropped line's end, to find the request it answers.
	lineHeadBytes = 4 << 10
	lineTailBytes = 64
)

func (l *lineBound) Read(p []byte) (n int, err error) {
	defer func() {
		if err != nil {
			l.markEnded()
		}
	}()
	if len(l.pending) > 0 {
		n = copy(p, l.pending)
		l.pending = l.pending[n:]
		if !l.sse {
			l.sniff(p[:n])
		}
		return n, nil
	}
	if l.err != nil {
		return 0, l.err
	}
	if l.skipping {
		return l.skip(p)
	}
	n, err = l.b.Read(p)
	if !l.sse {
		l.sniff(p[:n])
	}
	l.keepHead(p[:n])
	switch {
	case errors.Is(err, errMessageTooLarge) && l.skipOK != nil && !l.skipOK():
		return n, err
	case errors.Is(err, errMessageTooLarge):
		// Not the session's error (yet): see skip.
		l.b.tooLarge.Store(false)
		l.skipping, l.skipped, l.tail = true, 0, l.tail[:0]
		if n > 0 {
			return n, nil
		}
		return l.skip(p)
	case errors.Is(err, os.ErrClosed):
		err = io.EOF // closed by the session's close
	}
	return n, err
}

// Close closes what l reads (an SSE stream's body; a stdio server's stdout
// is closed by the session).
func (l *lineBound) Close() error { return l.b.Close() }

// keepHead keeps the start of the current line.
func (l *lineBound) keepHead(p []byte) {
	if i := bytes.LastIndexByte(p, '\n'); i >= 0 {
		l.head, p = l.head[:0], p[i+1:]
	}
	if room := lineHeadBytes - len(l.head); room > 0 {
		l.head = append(l.head, p[:min(len(p), room)]...)
	}
}

// skip reads and drops the rest of a line over the bound, using p as its
// buffer. At the line's end mcp-go gets a newline, the error answer for
// the request the line answered, if it did, and what followed the line.
func (l *lineBound) skip(p []byte) (int, error) {
	for {
		n, err := l.b.ReadCloser.Read(p)
		chunk := p[:n]
		if i := bytes.IndexByte(chunk, '\n'); i >= 0 {
			l.keepTail(chunk[:i])
			l.skipped += i
			rest := chunk[i+1:]
			out := []byte{'\n'}
			if l.sse {
				// Ends the event: mcp-go drops its data, which is not JSON,
				// and would join the next data line to it.
				out = append(out, '\n')
			}
			out = append(out, l.droppedAnswer()...)
			out = append(out, rest...)
			l.skipping, l.head = false, l.head[:0]
			l.keepHead(rest)
			// The bound starts again after the last newline handed on.
			if j := bytes.LastIndexByte(rest, '\n'); j >= 0 {
				l.b.left = maxMessageBytes - (len(rest) - 1 - j)
			} else {
				l.b.left = maxMessageBytes - len(rest)
			}
			l.pending = out
			return l.Read(p)
		}
		l.keepTail(chunk)
		l.skipped += n
		if l.skipped > maxSkippedBytes {
			l.b.tooLarge.Store(true)
			l.err = io.EOF
			if l.sse {
				l.err = errMessageTooLarge
			}
			_ = l.b.Close() // the server blocks on a full pipe, not on us
			if l.onTooLarge != nil {
				l.onTooLarge()
			}
			return 0, l.err
		}
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				err = io.EOF
			}
			l.err = err
			return 0, err
		}
	}
}

func (l *lineBound) keepTail(p []byte) {
	if len(p) >= lineTailBytes {
		l.tail = append(l.tail[:0], p[len(p)-lineTailBytes:]...)
		return
	}
	l.tail = append(l.tail, p...)
	if len(l.tail) > lineTailBytes {
		l.tail = append(l.tail[:0], l.tail[len(l.tail)-lineTailBytes:]...)
	}
}

// tailID matches the end of a message whose last member is a numeric id
// (the TypeScript SDK writes {"result":...,"jsonrpc":"2.0","id":7}); in
// valid JSON it can only be the top-level object's.
var tailID = regexp.MustCompile(`"id"\s*:\s*(-?[0-9]+)\s*}\s*$`)

// droppedAnswer is the line that replaces a dropped one: when it answered
// one of the client's requests (a "result" or "error" member and no
// "method"; mcp-go's request ids are numbers), a JSON-RPC error answer to
// that request, so that its caller is told at once; otherwise nothing
// (a notification or a request of the server's is lost).
func (l *lineBound) droppedAnswer() []byte {
	head := l.head
	if l.sse {
		head = bytes.TrimPrefix(bytes.TrimPrefix(head, []byte("data:")), []byte(" "))
	}
	id, answer := headMembers(head)
	if id == "" {
		if m := tailID.FindSubmatch(l.tail); m != nil {
			id = string(m[1])
		}
	}
	size := maxMessageBytes + l.skipped
	if !answer || id == "" {
		l.log.Warn("MCP server wrote a message over the size bound; dropped", "bytes", size, "limit_mib", maxMessageBytes>>20)
		return nil
	}
	l.log.Warn("MCP server answered with a message over the size bound; the request fails, the session goes on",
		"bytes", size, "limit_mib", maxMessageBytes>>20, "request_id", id)
	msg := fmt.Sprintf("the server's answer (%d MiB) is larger than the client's bound of %d MiB, so it was dropped; "+
		"ask for less at a time (a part, a range, a filter)", size>>20, maxMessageBytes>>20)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id),
		"error": map[string]any{"code": errCodeAnswerTooLarge, "message": msg}})
	if l.sse {
		return append(append([]byte("event: message\ndata: "), b...), '\n', '\n')
	}
	return append(b, '\n')
}

// errCodeAnswerTooLarge is the code of the error that replaces an answer
// over maxMessageBytes (JSON-RPC leaves -32000 to -32099 to
// implementations).
const errCodeAnswerTooLarge = -32001

// headMembers reads the top-level members at the start of a message: its
// id, when it is a number written before the first member whose value is
// an object or array, and whether it has a "result" or "error" member and
// no "method" before that point.
func headMembers(head []byte) (id string, answer bool) {
	dec := json.NewDecoder(bytes.NewReader(head))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return id, answer
		}
		key, ok := tok.(string)
		if !ok {
			return id, answer
		}
		switch key {
		case "result", "error":
			answer = true
		case "method":
			return "", false
		}
		tok, err = dec.Token()
		if err != nil {
			return id, answer
		}
		switch v := tok.(type) {
		case json.Delim:
			return id, answer // the rest is the large value
		case json.Number:
			if key == "id" {
				id = v.String()
			}
		}
	}
}
