package agentloop_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// The ephemeral schema retry's note showed each invalid call with its
// arguments verbatim and the full schema of its tool: 500 invalid calls of
// one tool in a reply made a note of 137 KB holding the same schema 500
// times, and one call with a megabyte of arguments a note of a megabyte
// (seen end to end with bin/worker and the scripted model), a request the
// model had not sent and one that may no longer fit its context. The note
// now gives each failing tool's schema once, quotes at most the start of
// long arguments, and lists at most 50 calls.
func TestSchemaRetryNoteBounded(t *testing.T) {
	t.Parallel()
	big := fmt.Sprintf(`{"repeat":0,"text":%q}`, strings.Repeat("x", 1<<20))
	many := func(n int, name, args string) []llm.ToolCall {
		calls := make([]llm.ToolCall, n)
		for i := range calls {
			calls[i] = call(name, args)
		}
		return calls
	}
	for _, tc := range []struct {
		name     string
		calls    []llm.ToolCall
		maxBytes int
		want     []string
		schemas  map[string]int // "Full input schema of NAME" → how often
	}{
		{
			name:     "500 invalid calls of one tool",
			calls:    many(500, "get_weather", `{"units":"k"}`),
			maxBytes: 8 << 10,
			want:     []string{`get_weather({"units":"k"})`, "at '/units'", "and 450 more invalid calls (get_weather)"},
			schemas:  map[string]int{"get_weather": 1},
		},
		{
			name:     "a megabyte of arguments",
			calls:    []llm.ToolCall{call("echo", big)},
			maxBytes: 4 << 10,
			want:     []string{`echo({"repeat":0,"text":"xxx`, fmt.Sprintf("... (%d bytes)", len(big)), "at '/repeat'"},
			schemas:  map[string]int{"echo": 1},
		},
		{
			name:     "two tools, two calls each",
			calls:    append(many(2, "get_weather", `{"units":"k"}`), many(2, "echo", `{"repeat":0}`)...),
			maxBytes: 4 << 10,
			want:     []string{"at '/units'", "at '/repeat'"},
			schemas:  map[string]int{"get_weather": 1, "echo": 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, toolReply(tc.calls...), textReply("Gave up."))
			if _, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "Go.", Mode: agentloop.ModeFull, Tools: tools}); err != nil {
				t.Fatal(err)
			}
			reqs := s.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want the first and the retry", len(reqs))
			}
			note := reqs[1].Messages[len(reqs[1].Messages)-1].Content
			if len(note) > tc.maxBytes {
				t.Errorf("the retry note is %d bytes, want at most %d: %.600s...", len(note), tc.maxBytes, note)
			}
			for _, w := range tc.want {
				if !strings.Contains(note, w) {
					t.Errorf("the retry note has no %q: %.1500s", w, note)
				}
			}
			for name, n := range tc.schemas {
				if got := strings.Count(note, "Full input schema of "+name+":"); got != n {
					t.Errorf("the retry note gives the schema of %s %d times, want %d", name, got, n)
				}
			}
		})
	}
}

// The violations of one call went whole into its events, the retry note
// and its result: an argument name of 100 KB that the schema does not
// allow (search_tools allows no other member) made a note of 200 KB and a
// result cut at 16 KiB before the schema (seen end to end with bin/worker
// and the scripted model), and an array of 10,000 wrong items 10,000
// lines. A violation is now quoted by its first 300 bytes, and a call
// shows at most 20 of them.
func TestViolationsBounded(t *testing.T) {
	t.Parallel()
	tags := make([]int, 10000)
	for _, tc := range []struct {
		name, tool, args string
		want             []string
	}{
		{name: "a member name of 100 KB", tool: "create_issue",
			args: fmt.Sprintf(`{"repo":{"owner":"o","name":"n"},"title":"t",%q:1}`, strings.Repeat("k", 100_000)),
			want: []string{"additional properties 'kkk", "(100", "bytes)"}},
		{name: "10,000 wrong items", tool: "create_issue",
			args: `{"repo":{"owner":"o","name":"n"},"title":"t","labels":` + mustJSON(t, tags) + `}`,
			want: []string{"at '/labels/0'", "and 9980 more"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, toolReply(call(tc.tool, tc.args)), toolReply(call(tc.tool, tc.args)), textReply("Gave up."))
			var ev events
			l := newLoop(t, s, agentloop.Config{})
			if _, err := l.Run(t.Context(), agentloop.Input{Task: "Go.", Mode: agentloop.ModeFull, Tools: tools, Sink: &ev}); err != nil {
				t.Fatal(err)
			}
			reqs := s.Requests()
			note := reqs[1].Messages[len(reqs[1].Messages)-1].Content
			result := toolMessages(reqs[2].Messages)[0].Content
			for what, text := range map[string]string{"retry note": note, "tool result": result} {
				if len(text) > 4<<10 {
					t.Errorf("the %s is %d bytes: %.400s...", what, len(text), text)
				}
				for _, w := range tc.want {
					if !strings.Contains(text, w) {
						t.Errorf("the %s has no %q: %.1000s", what, w, text)
					}
				}
			}
			if !strings.Contains(result, "Input schema of "+tc.tool+":") {
				t.Errorf("the tool result lost its schema: ...%s", tail(result))
			}
			for _, e := range ev.of(agentloop.EventToolValidationFailed) {
				if n := len(mustJSON(t, e.Data["errors"])); n > 8<<10 {
					t.Errorf("a tool.validation_failed event's errors are %d bytes", n)
				}
			}
		})
	}
}
