package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm"
)

// trojan is text a tool (or a model fed by one) may send: a terminal
// sequence, a carriage return that overwrites the line, and the
// bidirectional controls that reorder what follows them (Trojan Source).
const trojan = "safe\x1b]0;pwned\a\rrm -rf ~ \u202eexe.txt\u2066x\u2069\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u2067\u2068"

// obeyedIn is the runes of s a terminal would act on (newlines and tabs
// aside): control and bidirectional-control characters.
func obeyedIn(s string) []rune {
	var out []rune
	for _, r := range s {
		if (unicode.IsControl(r) && r != '\n' && r != '\t') || unicode.Is(unicode.Bidi_Control, r) {
			out = append(out, r)
		}
	}
	return out
}

// TestShownBidiControls: submit replaced the control characters of what
// tools, models and workers say with U+FFFD, but sent the bidirectional
// controls (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C) as they
// came: a tool's output in submit watch could reorder itself on the
// user's screen (U+202E: "exe.txt" read "txt.exe"). The fields formatEvent
// printed without oneLine (a tool's name, a job's error) and the
// transcript passed even control characters. worker tools (cmd/worker)
// already escapes both kinds.
func TestShownBidiControls(t *testing.T) {
	t.Parallel()
	data := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var transcript strings.Builder
	writeTranscript(&transcript, &jobs.Transcript{JobID: "j", Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "line one\n\tline two " + trojan},
		{Role: llm.RoleTool, Name: "cat" + trojan, Content: trojan},
		{Role: llm.RoleTool, Name: "type", Content: "one\r\ntwo\r\n\rthree"},
	}})
	for _, tc := range []struct{ name, got, want string }{
		{"tool.result output", formatEvent(jobs.Event{Type: "tool.result", Round: 1, Time: time.Now(),
			Data: data(map[string]any{"name": "cat", "output": trojan, "duration_ms": 1})}), "cat → safe\uFFFD]0;pwned"},
		{"tool.call name", formatEvent(jobs.Event{Type: "tool.call", Round: 1, Time: time.Now(),
			Data: data(map[string]any{"name": "cat" + trojan, "arguments": "{}"})}), "tool.call        round 1: catsafe\uFFFD"},
		{"failed error", formatEvent(jobs.Event{Type: jobs.EventFailed, Time: time.Now(),
			Data: data(map[string]any{"error": "boom " + trojan})}), "boom safe"},
		{"an unknown event", formatEvent(jobs.Event{Type: "custom", Time: time.Now(), Data: data(map[string]any{"x": trojan})}), `"x":"safe`},
		{"oneLine", oneLine(trojan, 200), "safe\uFFFD]0;pwned\uFFFD rm -rf ~ \uFFFDexe.txt"},
		{"transcript", transcript.String(), "user: line one\n\tline two safe\uFFFD"},
		// A CRLF line end is a newline; a CR alone still overwrites.
		{"CRLF line ends", transcript.String(), "tool type: one\ntwo\n\uFFFDthree\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if bad := obeyedIn(tc.got); len(bad) > 0 || !strings.Contains(tc.got, tc.want) {
				t.Errorf("got %q (obeyed: %q)\nwant it to hold %q and nothing a terminal obeys", tc.got, bad, tc.want)
			}
		})
	}
}
