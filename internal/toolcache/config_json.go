package toolcache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file says where in a servers file a value is: by its path of keys
// (mcpServers.github.env.PORT) and by line and column, as an editor shows
// them. encoding/json names neither: a type error's Field leaves out map
// keys ("env", not "env.PORT") and its Offset is a byte count.

// utf8BOM starts a file some editors (Windows Notepad) save as UTF-8.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// jsonPath is a path of object keys (string) and array indexes (int).
type jsonPath []any

// String is the path as written in JavaScript: mcpServers.x.args[1], with
// a key that is no plain name quoted (mcpServers["my server"]).
func (p jsonPath) String() string {
	var b strings.Builder
	for _, e := range p {
		switch e := e.(type) {
		case int:
			b.WriteString("[" + strconv.Itoa(e) + "]")
		case string:
			if plainKey(e) {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(e)
			} else {
				b.WriteString("[" + strconv.Quote(e) + "]")
			}
		}
	}
	return b.String()
}

func plainKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range []byte(k) {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// jsonDoc is a servers file as read (orig) and as parsed (data: orig with
// a UTF-8 byte order mark blanked, so that offsets are the same in both).
type jsonDoc struct {
	orig, data []byte
}

func newJSONDoc(orig []byte) jsonDoc {
	d := jsonDoc{orig: orig, data: orig}
	if bytes.HasPrefix(orig, utf8BOM) {
		d.data = append([]byte("   "), orig[len(utf8BOM):]...)
	}
	return d
}

// position is where the byte at off is, as an editor shows it: "line 3,
// column 27" (columns count characters from 1; a byte order mark is not
// one).
func (d jsonDoc) position(off int) string {
	off = min(max(off, 0), len(d.orig))
	before := d.orig[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	col := utf8.RuneCount(before[lineStart:]) + 1
	if line == 1 && bytes.HasPrefix(d.orig, utf8BOM) && off >= len(utf8BOM) {
		col--
	}
	return fmt.Sprintf("line %d, column %d", line, col)
}

// errStopWalk ends walk early.
var errStopWalk = errors.New("stop")

// dupKeyError is a key given twice in one JSON object.
type dupKeyError struct {
	path          jsonPath // of the object
	key           string   // as given the second time
	otherKey      string   // as given the first time (another case, at the top level)
	first, second string   // the keys' positions
}

func (e *dupKeyError) Error() string {
	where := fmt.Sprintf("at %s and %s", e.first, e.second)
	switch {
	case len(e.path) == 0 && e.key != e.otherKey:
		return fmt.Sprintf("toolcache: %q and %q (%s) are one key to this reader, which would merge them: write one", e.otherKey, e.key, where)
	case len(e.path) == 0:
		return fmt.Sprintf("toolcache: %q is given twice (%s): JSON readers keep one of them; write one", e.key, where)
	case len(e.path) == 1:
		return fmt.Sprintf("toolcache: server %q: defined twice in %q (%s): the second would replace the first", e.key, e.path[0], where)
	}
	return fmt.Sprintf("toolcache: %s: key %q is given twice (%s): the second would replace the first", e.path, e.key, where)
}

// walk calls f with the path and byte span of each value of d.data (which
// must be valid JSON) in document order; a container is visited at its
// start, with end -1. f returning false ends the walk. The path is only
// f's to read during the call: f must copy it to keep it (one slice
// serves the whole walk, so that a deep document costs its depth once). A key given twice
// in one object (at the top level also "mcpServers" and "MCPServers",
// which encoding/json reads as one) is a *dupKeyError: encoding/json
// keeps one of the two, silently.
func (d jsonDoc) walk(f func(path jsonPath, start, end int) bool) error {
	dec := json.NewDecoder(bytes.NewReader(d.data))
	dec.UseNumber()
	var path jsonPath
	err := d.walkValue(dec, &path, f)
	if errors.Is(err, errStopWalk) {
		return nil
	}
	return err
}

// next is the offset of the token after off (past blanks, ':' and ',').
func (d jsonDoc) next(off int64) int {
	i := int(off)
	for i < len(d.data) && strings.IndexByte(" \t\r\n:,", d.data[i]) >= 0 {
		i++
	}
	return i
}

func (d jsonDoc) walkValue(dec *json.Decoder, stack *jsonPath, f func(jsonPath, int, int) bool) error {
	path := *stack
	start := d.next(dec.InputOffset())
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	delim, isDelim := tok.(json.Delim)
	if !isDelim {
		if !f(path, start, int(dec.InputOffset())) {
			return errStopWalk
		}
		return nil
	}
	if !f(path, start, -1) {
		return errStopWalk
	}
	switch delim {
	case '{':
		seen := map[string]int{}
		for dec.More() {
			at := d.next(dec.InputOffset())
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			folded := key
			if len(path) == 0 && (strings.EqualFold(key, "mcpServers") || strings.EqualFold(key, "servers")) {
				folded = strings.ToLower(key)
			}
			if first, ok := seen[folded]; ok {
				return &dupKeyError{path: slices.Clone(path), key: key, otherKey: firstString(d.data[first:]), first: d.position(first), second: d.position(at)}
			}
			seen[folded] = at
			*stack = append(path, key)
			if err := d.walkValue(dec, stack, f); err != nil {
				return err
			}
			*stack = path
		}
	case '[':
		for i := 0; dec.More(); i++ {
			*stack = append(path, i)
			if err := d.walkValue(dec, stack, f); err != nil {
				return err
			}
			*stack = path
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// firstString is the JSON string s starts with, decoded ("" if none).
func firstString(s []byte) string {
	var v string
	if err := json.NewDecoder(bytes.NewReader(s)).Decode(&v); err != nil {
		return ""
	}
	return v
}

// spanOf is the start offset of the value at path, or -1.
func (d jsonDoc) spanOf(path jsonPath) int {
	found := -1
	_ = d.walk(func(p jsonPath, start, _ int) bool {
		if samePath(p, path) {
			found = start
			return false
		}
		return true
	})
	return found
}

func samePath(a, b jsonPath) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// valueAt is the path and start offset of the value within the one at
// prefix that encoding/json's type error offset off (from the start of
// that value, or of the document for an empty prefix) points at: the end of a string, number, boolean or null, or
// just past the '{' or '[' of an object or array.
func (d jsonDoc) valueAt(prefix jsonPath, off int64) (jsonPath, int, bool) {
	base := 0 // the whole document is decoded from its first byte
	if len(prefix) > 0 {
		if base = d.spanOf(prefix); base < 0 {
			return nil, 0, false
		}
	}
	abs := base + int(off)
	var path jsonPath
	at := -1
	_ = d.walk(func(p jsonPath, start, end int) bool {
		if len(p) < len(prefix) || !samePath(p[:len(prefix)], prefix) {
			return true
		}
		if end == abs || end < 0 && start+1 == abs {
			path, at = slices.Clone(p), start
			return false
		}
		return true
	})
	return path, at, at >= 0
}
