package codemode

import (
	"strconv"
	"strings"
)

// Numbers a JavaScript number (a float64) cannot hold. goja's JSON.parse
// decodes with encoding/json into float64: a number beyond its range
// (1e400) failed the whole parse with Go's "json: cannot unmarshal number
// 1e400 into Go value of type float64", and an integer beyond 2^53 (an
// ID of 30 digits) came out rounded to another integer, without a word.

// maxSafeInteger is Number.MAX_SAFE_INTEGER (2^53-1) in decimal.
const maxSafeInteger = "9007199254740991"

// numberByte reports whether c can be part of a JSON number token.
func numberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// numberTokens calls f with the offsets of each number token of a valid
// JSON text (outside its strings); f returns the text to put in its
// place and true, or false to keep it. The result is s itself when
// nothing was replaced.
func numberTokens(s string, f func(tok string) (string, bool)) string {
	var b strings.Builder
	last, inStr := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		if c == '"' {
			inStr = true
			continue
		}
		// Outside strings only numbers have digits or '-' (true, false
		// and null have neither).
		if c != '-' && (c < '0' || c > '9') {
			continue
		}
		j := i + 1
		for j < len(s) && numberByte(s[j]) {
			j++
		}
		if repl, ok := f(s[i:j]); ok {
			if b.Len() == 0 {
				b.Grow(len(s) + 16)
			}
			b.WriteString(s[last:i])
			b.WriteString(repl)
			last = j
		}
		i = j - 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// heldExactly reports whether a JSON number token arrives in JavaScript
// as the number it says, or near enough: an integer token (no fraction or
// exponent) within ±(2^53-1), which a float64 holds exactly, or any other
// number within float64's range that is not a non-zero one rounded to 0.
// A fraction rounded to the nearest float64 (0.1) is held: that is what a
// JavaScript number is.
func heldExactly(tok string) bool {
	digits := strings.TrimPrefix(tok, "-")
	if !strings.ContainsAny(digits, ".eE") {
		// JSON has no leading zeros: the length orders the magnitudes.
		return len(digits) < len(maxSafeInteger) || len(digits) == len(maxSafeInteger) && digits <= maxSafeInteger
	}
	f, err := strconv.ParseFloat(tok, 64)
	if err != nil {
		return false // beyond float64's range
	}
	if f == 0 {
		mantissa, _, _ := strings.Cut(strings.ToLower(digits), "e")
		return !strings.ContainsAny(mantissa, "123456789") // a true zero, not one underflowed
	}
	return true
}

// exactNumbers is a tool result's JSON text with every number that a
// JavaScript number cannot hold (see heldExactly) made a string of its
// digits as the tool wrote them: "123456789012345678901234567890",
// "1e400". The code gets the exact value instead of a rounded one, or of
// a parse that failed.
func exactNumbers(s string) string {
	return numberTokens(s, func(tok string) (string, bool) {
		if heldExactly(tok) {
			return "", false
		}
		return `"` + tok + `"`, true
	})
}

// overflowMarks is the code's JSON.parse text with each number beyond
// float64's range replaced by a string, mark+"+" for the positive ones and
// mark+"-" for the negative ones, mark chosen to be in no string of the
// text; the prelude's reviver turns them into ±Infinity, as JavaScript's
// JSON.parse does. ok is false when the text has no such number.
func overflowMarks(s string) (text, mark string, ok bool) {
	// A NUL and a name the text does not contain, so no string of the
	// text is a mark (a NUL is escaped in JSON: \u0000name).
	name := "codemode-infinity"
	for strings.Contains(s, name) {
		name += "!"
	}
	text = numberTokens(s, func(tok string) (string, bool) {
		if _, err := strconv.ParseFloat(tok, 64); err == nil {
			return "", false
		}
		ok = true
		if tok[0] == '-' {
			return `"\u0000` + name + `-"`, true
		}
		return `"\u0000` + name + `+"`, true
	})
	return text, "\x00" + name, ok
}
