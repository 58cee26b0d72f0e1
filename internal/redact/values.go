package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Forms are the ways text that quotes secret writes it, for Text and
// JSON: as it is; inside a JSON string as encoders write it (Go's, which
// escapes <, > and & as \u003c, \u003e and \u0026; JavaScript's and
// Python's, which do not; with '/' escaped as "\/" by PHP's; with every
// non-ASCII character as \uXXXX by Python's default); and percent-encoded
// in a query or a path. Each form is listed once, secret first. A server
// that prints its configuration as JSON (a tool answering with its
// environment as an object), or a URL that carries the secret, then
// shows none of it.
func Forms(secret string) []string {
	if secret == "" {
		return nil
	}
	out := []string{secret}
	add := func(f string) {
		if f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	for _, html := range []bool{true, false} {
		f := jsonString(secret, html)
		add(f)
		add(strings.ReplaceAll(f, "/", `\/`))
		add(asciiJSON(f))
	}
	add(url.QueryEscape(secret))
	add(url.PathEscape(secret))
	return out
}

// jsonString is s as encoding/json writes it inside a string, without
// the quotes, with or without its HTML escapes.
func jsonString(s string, html bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(html)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(strings.TrimSuffix(b.String(), "\n")[1:], `"`)
}

// asciiJSON is an escaped JSON string with every non-ASCII character
// written as \uXXXX (a surrogate pair beyond the BMP), as Python's
// json.dumps does by default.
func asciiJSON(f string) string {
	var b strings.Builder
	for _, r := range f {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// JSON is raw, a JSON document (a tool's structured content, a schema),
// with every occurrence of each of secrets inside its strings, keys and
// values, replaced by Mask, and the rest byte for byte. Pass the secrets'
// Forms: a match is made on the document's text, so a secret written
// with escapes is found in its escaped form. A number a secret occurs in
// (a credential of digits written as a number) is replaced by the string
// "xxxxx", so the document stays valid JSON; a string whose masking would cut an escape sequence
// is decoded, masked and encoded again. raw that is no valid JSON is
// masked as Text. A string that writes a printable ASCII character as a
// \u escape no encoder writes ("\u0067hp_…", see oddEscape) is decoded
// and masked as Text, and encoded again when masking changed it. A masked key that is then the same as another key of
// its object is told apart by a suffix ("xxxxx#2", see distinctKeys), so
// no value is lost to a decoder that keeps one value a key. It takes time
// linear in len(raw) for each secret, as Text.
func JSON(raw []byte, secrets []string) []byte {
	s := string(raw)
	covered := cover(s, secrets)
	odd := strings.Contains(s, `\u00`) && oddEscape(s) // maybe a secret no Form writes
	if covered == nil && !odd {
		return raw
	}
	if !json.Valid(raw) {
		if covered == nil {
			return raw
		}
		return []byte(writeMasked(s, covered))
	}
	if covered == nil {
		covered = make([]bool, len(s))
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0          // s[:last] is written
	maskedKey := false // some key was masked
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '-' || c >= '0' && c <= '9' { // outside strings: a number
			k := i + 1
			for k < len(s) && strings.IndexByte("0123456789.eE+-", s[k]) >= 0 {
				k++
			}
			if slices.Contains(covered[i:k], true) {
				b.WriteString(s[last:i])
				b.WriteString(`"` + Mask + `"`)
				last = k
			}
			i = k - 1
			continue
		}
		if s[i] != '"' { // in a valid document, a '"' outside strings starts one
			continue
		}
		j, esc := i+1, false
		for ; j < len(s) && s[j] != '"'; j++ {
			if s[j] == '\\' {
				esc = true
				j++
			}
		}
		lit := s[i+1 : j]
		if esc && odd && !slices.Contains(covered[i+1:j], true) && oddEscape(lit) {
			var d string
			_ = json.Unmarshal([]byte(s[i:j+1]), &d) // valid: the document is
			if m := Text(d, secrets); m != d {
				b.WriteString(s[last : i+1])
				b.WriteString(jsonString(m, false))
				last = j
				maskedKey = maskedKey || isKey(s, j+1)
			}
		} else if slices.Contains(covered[i+1:j], true) {
			m := writeMasked(lit, covered[i+1:j])
			if esc && !json.Valid([]byte(`"`+m+`"`)) {
				var d string
				_ = json.Unmarshal([]byte(s[i:j+1]), &d) // valid: the document is
				m = jsonString(Text(d, secrets), false)
			}
			b.WriteString(s[last : i+1])
			b.WriteString(m)
			last = j
			maskedKey = maskedKey || isKey(s, j+1)
		}
		i = j
	}
	b.WriteString(s[last:])
	if maskedKey {
		return distinctKeys(b.String())
	}
	return []byte(b.String())
}

// oddEscape says whether s holds a \u escape of a printable ASCII
// character other than those encoders escape (Go's <, > and &): a
// server that writes "\u0067hp_…" for "ghp_…" shows a secret none of its
// Forms matches, which a decoder (a script, the model) reads as it is.
func oddEscape(s string) bool {
	for i := strings.Index(s, `\u00`); i >= 0 && i+6 <= len(s); {
		if c, err := strconv.ParseUint(s[i+2:i+6], 16, 8); err == nil && c >= 0x20 && c < 0x7f && c != '<' && c != '>' && c != '&' {
			// an odd number of '\'s before it: an escape, not "\\u00…"
			n := 0
			for k := i - 1; k >= 0 && s[k] == '\\'; k-- {
				n++
			}
			if n%2 == 0 {
				return true
			}
		}
		k := strings.Index(s[i+1:], `\u00`)
		if k < 0 {
			break
		}
		i += 1 + k
	}
	return false
}

// isKey says whether the string of a valid JSON document s that ends
// before s[end] is an object's key: a ':' follows it.
func isKey(s string, end int) bool {
	for ; end < len(s); end++ {
		switch s[end] {
		case ' ', '\t', '\n', '\r':
			continue
		case ':':
			return true
		}
		return false
	}
	return false
}

// distinctKeys is s, a valid JSON document whose masked keys may now be
// the same as another key of their object ({"ghp_a…":1,"ghp_b…":2} is
// {"xxxxx":1,"xxxxx":2}), with each key holding Mask that is the same as
// an earlier key of its object renamed by a suffix, "xxxxx#2", "xxxxx#3",
// one no other key of the object has. Keys the same in the document as
// the server wrote it, and holding no Mask, are left as they are.
func distinctKeys(s string) []byte {
	type key struct {
		start, end int // the literal, quotes included
		name       string
	}
	type object struct {
		keys []key
	}
	var (
		stack   []*object       // nil for an array
		renamed = map[int]key{} // by start: the key's literal, now name's
	)
	closeObject := func(o *object) {
		names := make(map[string]bool, len(o.keys))
		for _, k := range o.keys {
			names[k.name] = true
		}
		seen := make(map[string]bool, len(o.keys))
		for _, k := range o.keys {
			if seen[k.name] && strings.Contains(k.name, Mask) {
				n := 2
				for names[fmt.Sprintf("%s#%d", k.name, n)] {
					n++
				}
				name := fmt.Sprintf("%s#%d", k.name, n)
				names[name] = true
				renamed[k.start] = key{k.start, k.end, `"` + jsonString(name, false) + `"`}
				continue
			}
			seen[k.name] = true
		}
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			stack = append(stack, &object{})
		case '[':
			stack = append(stack, nil)
		case '}', ']':
			if o := stack[len(stack)-1]; o != nil {
				closeObject(o)
			}
			stack = stack[:len(stack)-1]
		case '"':
			j := i + 1
			for ; s[j] != '"'; j++ {
				if s[j] == '\\' {
					j++
				}
			}
			if len(stack) > 0 && stack[len(stack)-1] != nil && isKey(s, j+1) {
				o := stack[len(stack)-1]
				var name string
				_ = json.Unmarshal([]byte(s[i:j+1]), &name) // valid: the document is
				o.keys = append(o.keys, key{i, j + 1, name})
			}
			i = j
		}
	}
	if len(renamed) == 0 {
		return []byte(s)
	}
	starts := make([]int, 0, len(renamed))
	for at := range renamed {
		starts = append(starts, at)
	}
	slices.Sort(starts)
	var b strings.Builder
	b.Grow(len(s) + 3*len(renamed))
	last := 0
	for _, at := range starts {
		b.WriteString(s[last:at])
		b.WriteString(renamed[at].name)
		last = renamed[at].end
	}
	b.WriteString(s[last:])
	return []byte(b.String())
}

// minPart is the shortest part of a secret Window masks at a cut.
const minPart = 4

// Window is Text for s, a window of a longer text (the tail of a log, the
// start of a line) cut before it (cutBefore) or after it (cutAfter): an
// occurrence of a secret that the cut split shows only part of it, which
// Text cannot find. At a cut, the longest part of a secret of at least 4
// bytes that s begins with (the secret's end) or ends with (its start) is
// masked too, and so is a window cut on both sides that lies inside a
// secret. When the whole text is at hand, mask it with Text before
// cutting instead: a cut can then only split a Mask.
func Window(s string, secrets []string, cutBefore, cutAfter bool) string {
	head, tail := 0, 0 // bytes of s's start and end that are a secret's part
	for _, sec := range secrets {
		if cutBefore && cutAfter && len(s) >= minPart && len(s) < len(sec) && strings.Contains(sec, s) {
			return Mask // a window inside a secret
		}
		for k := min(len(sec)-1, len(s)); k >= minPart && (cutBefore && k > head || cutAfter && k > tail); k-- {
			if cutBefore && k > head && strings.HasPrefix(s, sec[len(sec)-k:]) {
				head = k
			}
			if cutAfter && k > tail && strings.HasSuffix(s, sec[:k]) {
				tail = k
			}
		}
	}
	if head+tail > 0 && head+tail >= len(s) {
		return Mask
	}
	out := Text(s[head:len(s)-tail], secrets)
	if head > 0 {
		out = Mask + out
	}
	if tail > 0 {
		out += Mask
	}
	return out
}

// TextAcross is Text for s, pieces of text (a tool result's content
// blocks) joined by one byte at each of seps (ascending offsets in s):
// a secret that one piece ends with the start of and the next begins
// with the rest of is masked too, on both sides of the separator, which
// is kept ("xxxxx\nxxxxx"). A secret spread over three pieces or more is
// not found. It takes time linear in len(s) and in len(seps) times the
// longest secret's length, for each secret.
func TextAcross(s string, seps []int, secrets []string) string {
	covered := cover(s, secrets)
	longest := 0
	for _, sec := range secrets {
		longest = max(longest, len(sec))
	}
	for _, at := range seps {
		if at < 0 || at >= len(s) || longest < 2 {
			continue
		}
		lo, hi := max(0, at-longest+1), min(len(s), at+longest)
		c := cover(s[lo:at]+s[at+1:hi], secrets) // the two pieces' edges, glued
		for i, v := range c {
			if !v {
				continue
			}
			j := lo + i
			if j >= at {
				j++ // past the separator
			}
			if covered == nil {
				covered = make([]bool, len(s))
			}
			covered[j] = true
		}
	}
	if covered == nil {
		return s
	}
	return writeMasked(s, covered)
}
