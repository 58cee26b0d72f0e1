package agentloop_test

import (
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// A call cut off at the output token limit is answered saying so, and how
// to get past it. Before: the model was only told its arguments were not
// valid JSON, so it sent the same call again and was cut off again, and
// nothing in the job's events named the limit.
func TestCutOffCallSaysSo(t *testing.T) {
	t.Parallel()
	const note = "the reply was cut off at the output token limit"
	for _, tc := range []struct {
		name, args, finish string
		wantResult         string
		wantNote           bool
	}{
		{name: "length", args: `"{\"city\":\"Li"`, finish: "length",
			wantResult: `Error: the arguments are not valid JSON (unexpected end of JSON input)`, wantNote: true},
		{name: "MAX_TOKENS through a proxy", args: `"{\"city\":"`, finish: "MAX_TOKENS",
			wantResult: `Error: the arguments are not valid JSON`, wantNote: true},
		{name: "whole arguments in a reply cut off", args: `"{\"city\":\"Lima\"}"`, finish: "length",
			wantResult: "weather in Lima: 21c, sunny"},
		{name: "invalid arguments, not cut off", args: `"{\"city\":\"Li"`, finish: "tool_calls",
			wantResult: `Error: the arguments are not valid JSON`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, rawReply(rawCalls(rawCall("c1", "get_weather", tc.args)), tc.finish), textReply("Lima is sunny."))
			var ev events
			l := newLoop(t, s, agentloop.Config{})
			res, err := l.Run(t.Context(), agentloop.Input{Task: "Weather in Lima?", Mode: agentloop.ModeFull, Tools: tools, Sink: &ev})
			if err != nil {
				t.Fatal(err)
			}
			if res.Answer != "Lima is sunny." {
				t.Errorf("answer %q", res.Answer)
			}
			results := toolMessages(s.Requests()[1].Messages)
			if len(results) != 1 || !strings.HasPrefix(results[0].Content, tc.wantResult) || strings.Contains(results[0].Content, note) != tc.wantNote {
				t.Fatalf("results %s, want one starting %q, note %v", mustJSON(t, results), tc.wantResult, tc.wantNote)
			}
			if tc.wantNote && !strings.Contains(results[0].Content, `finish_reason "`+tc.finish+`"`) {
				t.Errorf("result %q does not name the finish reason", results[0].Content)
			}
			if r := ev.of(agentloop.EventToolResult); len(r) != 1 || r[0].Data["output"] != results[0].Content {
				t.Errorf("tool.result events %s", mustJSON(t, r))
			}
		})
	}
}
