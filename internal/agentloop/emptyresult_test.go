package agentloop_test

import (
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/reflect"
)

// A tool result with no text is shown to the model as a short note:
// Anthropic's API (also behind OpenAI-compatible proxies) refuses an empty
// tool result, which failed the request after the call had run. The
// tool.result event keeps what the tool returned.
func TestEmptyToolResultNamed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, args string }{
		{"empty", `"{\"text\":\"\"}"`},
		{"white space", `"{\"text\":\"  \\n\"}"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, rawReply(rawCalls(rawCall("c1", "echo", tc.args)), "tool_calls"), textReply("Done."))
			var ev events
			l := newLoop(t, s, agentloop.Config{})
			res, err := l.Run(t.Context(), agentloop.Input{Task: "Echo nothing.", Mode: agentloop.ModeFull, Tools: tools, Sink: &ev})
			if err != nil {
				t.Fatal(err)
			}
			if res.Answer != "Done." {
				t.Errorf("answer %q", res.Answer)
			}
			results := toolMessages(s.Requests()[1].Messages)
			if len(results) != 1 || results[0].Content != "(the tool returned no output)" {
				t.Fatalf("results %s, want the no-output note", mustJSON(t, results))
			}
			r := ev.of(agentloop.EventToolResult)
			if len(r) != 1 || r[0].Data["output"] == results[0].Content || r[0].Data["truncated_for_model"] != false {
				t.Errorf("tool.result events %s, want the tool's own output, not truncated", mustJSON(t, r))
			}
		})
	}
}

// The same for a call from code: the script gets the empty text, and the
// reflected transcript, history for a continuation, gets the note. Before,
// its inner result was an empty tool message, and a continuation on
// Anthropic (behind an OpenAI-compatible proxy) failed at once.
func TestEmptyInnerResultInHistory(t *testing.T) {
	t.Parallel()
	var ts testServer
	tools := newToolSet(t, &ts, false)
	s := llmtest.NewServer(t, toolReply(codeCall(`const r = await tools.echo({text: ""}); return JSON.stringify(r)`)), textReply("Done."))
	res, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "Echo nothing.", Mode: agentloop.ModeCode, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if out := toolMessages(res.Messages); len(out) != 1 || out[0].Content != `""` {
		t.Fatalf("the script saw %s, want the empty text", mustJSON(t, out))
	}
	history := reflect.Rewrite(res.Messages, res.Records)
	s2 := llmtest.NewServer(t)
	s2.Handle(func(r llmtest.RecordedRequest) llmtest.Reply {
		for _, m := range r.Messages {
			if m.Role == llm.RoleTool && strings.TrimSpace(m.Content) == "" {
				return llmtest.Reply{Status: 400, Content: "messages: text content blocks must be non-empty"}
			}
		}
		return textReply("Continued.")
	})
	if _, err := newLoop(t, s2, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "And?", History: history, Mode: agentloop.ModeFull, Tools: tools}); err != nil {
		t.Fatalf("continuation: %v (history %s)", err, mustJSON(t, history))
	}
}
