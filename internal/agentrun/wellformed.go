package agentrun

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/jetagent/jetagent/internal/llm"
)

// wellFormed returns msgs (the reflected transcript, a continuation's
// history) with the provider data the loop keeps verbatim (reasoning,
// reasoning_content, reasoning_details, a call's extra_content) made fit
// for the job door: each \u escape of half a UTF-16 surrogate pair
// becomes \ufffd. Byte-level reasoning models (Kimi, GLM, MiMo) emit such
// halves, and the door refuses them anywhere in a job ("job is not JSON:
// a high surrogate with no low one after it"), so the transcript the
// worker stored was refused as history. U+FFFD is what encoding/json
// reads for such an escape. The raw transcript keeps what came. msgs is
// not modified; it is returned as it is when nothing needs a change.
func wellFormed(msgs []llm.Message) []llm.Message {
	var out []llm.Message
	edit := func(i int) *llm.Message {
		if out == nil {
			out = slices.Clone(msgs)
		}
		return &out[i]
	}
	for i, m := range msgs {
		for _, f := range []struct {
			raw json.RawMessage
			set func(*llm.Message, json.RawMessage)
		}{
			{m.ReasoningContent, func(m *llm.Message, v json.RawMessage) { m.ReasoningContent = v }},
			{m.Reasoning, func(m *llm.Message, v json.RawMessage) { m.Reasoning = v }},
			{m.ReasoningDetails, func(m *llm.Message, v json.RawMessage) { m.ReasoningDetails = v }},
		} {
			if v, changed := wholeSurrogates(f.raw); changed {
				f.set(edit(i), v)
			}
		}
		cloned := false
		for k, c := range m.ToolCalls {
			v, changed := wholeSurrogates(c.ExtraContent)
			if !changed {
				continue
			}
			e := edit(i)
			if !cloned {
				e.ToolCalls, cloned = slices.Clone(m.ToolCalls), true
			}
			e.ToolCalls[k].ExtraContent = v
		}
	}
	if out == nil {
		return msgs
	}
	return out
}

// wholeSurrogates returns raw (JSON) with each \u escape of half a
// surrogate pair (a high one not followed by a low one, or a low one
// alone) replaced by \ufffd, and whether there was one.
func wholeSurrogates(raw json.RawMessage) (json.RawMessage, bool) {
	var out []byte // nil until the first replacement
	last, inString := 0, false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\' && i+1 < len(raw) && raw[i+1] == 'u':
			r, ok := escapedUnit(raw, i)
			if !ok {
				i++
				continue
			}
			n, half := 6, false
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				half = true
			case r >= 0xD800 && r <= 0xDBFF:
				if low, ok := escapedUnit(raw, i+6); ok && low >= 0xDC00 && low <= 0xDFFF {
					n = 12 // a whole pair
				} else {
					half = true
				}
			}
			if half {
				out = append(append(out, raw[last:i]...), `\ufffd`...)
				last = i + 6
			}
			i += n - 1
		case c == '\\':
			i++ // the escaped character, which may be a quote or a backslash
		}
	}
	if out == nil {
		return raw, false
	}
	return append(out, raw[last:]...), true
}

// escapedUnit reads the \uXXXX escape at raw[i:].
func escapedUnit(raw []byte, i int) (rune, bool) {
	if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
	return rune(v), err == nil
}
