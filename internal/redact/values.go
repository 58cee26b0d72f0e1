package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
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
// with escapes is found in its escaped form. Occurrences outside strings
// (a secret of digits that is also a number) are left, so the document
// stays valid JSON; a string whose masking would cut an escape sequence
// is decoded, masked and encoded again. raw that is no valid JSON is
// masked as Text. Two keys of an object can become the same key. It takes
// time linear in len(raw) for each secret, as Text.
func JSON(raw []byte, secrets []string) []byte {
	s := string(raw)
	covered := cover(s, secrets)
	if covered == nil {
		return raw
	}
	if !json.Valid(raw) {
		return []byte(writeMasked(s, covered))
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0 // s[:last] is written
	for i := 0; i < len(s); i++ {
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
		if slices.Contains(covered[i+1:j], true) {
			m := writeMasked(lit, covered[i+1:j])
			if esc && !json.Valid([]byte(`"`+m+`"`)) {
				var d string
				_ = json.Unmarshal([]byte(s[i:j+1]), &d) // valid: the document is
				m = jsonString(Text(d, secrets), false)
			}
			b.WriteString(s[last : i+1])
			b.WriteString(m)
			last = j
		}
		i = j
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
