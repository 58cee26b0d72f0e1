package jobs

import (
	"fmt"
	"strconv"
)

// checkSurrogates refuses a \u escape of half a UTF-16 surrogate pair: a
// high surrogate not followed by a low one, or a low one alone
// ("a\ud800b"). encoding/json turns each into U+FFFD, so the task run
// would not be the task sent, and another parser may keep, refuse or drop
// it (I-JSON, RFC 7493, forbids them). data is valid JSON (the schema
// check read it), so every escape is complete.
func checkSurrogates(data []byte) error {
	inString := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\' && i+1 < len(data) && data[i+1] == 'u':
			r, ok := escapedUnit(data, i)
			if !ok {
				i++
				continue
			}
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return surrogateError(data, i, r, "a low surrogate with no high one before it")
			case r >= 0xD800 && r <= 0xDBFF:
				low, ok := escapedUnit(data, i+6)
				if !ok || low < 0xDC00 || low > 0xDFFF {
					return surrogateError(data, i, r, "a high surrogate with no low one after it")
				}
				i += 11 // both escapes
			default:
				i += 5
			}
		case c == '\\':
			i++ // the escaped character, which may be a quote
		}
	}
	return nil
}

// escapedUnit reads the \uXXXX escape at data[i:].
func escapedUnit(data []byte, i int) (rune, bool) {
	if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(data[i+2:i+6]), 16, 16)
	return rune(v), err == nil
}

func surrogateError(data []byte, i int, r rune, what string) error {
	return fmt.Errorf("%w%w: %s at byte %d (\\u%04x: half a UTF-16 pair, which JSON decoders turn into U+FFFD or refuse; "+
		"send the character itself, or both halves of its pair)", ErrNotJSON, errBeyondSchema, what, i, r)
}
