package agentloop_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// Thinking-mode servers and Gemini 3 need what they sent beside a turn of
// calls sent back with it in the next request, and refuse the request
// otherwise: DeepSeek, Kimi and GLM the reasoning_content, Gemini a call's
// thought signature. Before: the loop kept neither, and every such job
// failed in its second request with the server's 400.
func TestProviderDataGoesBackWithCalls(t *testing.T) {
	t.Parallel()
	const args = `"{\"city\":\"Lima\"}"`
	for _, tc := range []struct {
		name  string
		first llmtest.Reply
		// refuse says why a server refuses a request whose turn of calls
		// (msg) lacks what it sent ("" when it does not).
		refuse func(msg llm.Message) string
	}{
		{name: "DeepSeek reasoning_content",
			first: rawReply(`{"role":"assistant","content":"","reasoning_content":"Lima: call get_weather.","tool_calls":[`+rawCall("call_0", "get_weather", args)+`]}`, "tool_calls"),
			refuse: func(m llm.Message) string {
				if string(m.ReasoningContent) != `"Lima: call get_weather."` {
					return "Missing `reasoning_content` field in the assistant message at message index 1."
				}
				return ""
			}},
		{name: "Gemini thought signature",
			first: rawReply(`{"role":"assistant","tool_calls":[{"id":"g1","type":"function","function":{"name":"get_weather","arguments":`+args+`},`+
				`"extra_content":{"google":{"thought_signature":"CrICAdHt"}}}]}`, "tool_calls"),
			refuse: func(m llm.Message) string {
				if !strings.Contains(string(m.ToolCalls[0].ExtraContent), `"thought_signature":"CrICAdHt"`) {
					return "Function call is missing a thought_signature in functionCall parts."
				}
				return ""
			}},
		{name: "OpenRouter reasoning",
			first: rawReply(`{"role":"assistant","content":null,"reasoning":"Lima.","reasoning_details":[{"type":"reasoning.text","text":"Lima."}],"tool_calls":[`+rawCall("c1", "get_weather", args)+`]}`, "tool_calls"),
			refuse: func(m llm.Message) string {
				if string(m.Reasoning) != `"Lima."` || string(m.ReasoningDetails) != `[{"type":"reasoning.text","text":"Lima."}]` {
					return "reasoning not passed back"
				}
				return ""
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, tc.first)
			s.Handle(func(r llmtest.RecordedRequest) llmtest.Reply {
				for _, m := range r.Messages {
					if len(m.ToolCalls) > 0 {
						if why := tc.refuse(m); why != "" {
							return llmtest.Reply{Status: 400, Content: why}
						}
					}
				}
				return rawReply(`{"role":"assistant","content":"Lima is sunny.","reasoning_content":"Done."}`, "stop")
			})
			l := newLoop(t, s, agentloop.Config{})
			res, err := l.Run(t.Context(), agentloop.Input{Task: "Weather in Lima?", Mode: agentloop.ModeFull, Tools: tools})
			if err != nil {
				t.Fatal(err)
			}
			if res.Answer != "Lima is sunny." || ts.calls.Load() != 1 || len(s.Requests()) != 2 {
				t.Fatalf("answer %q, %d calls, %d requests", res.Answer, ts.calls.Load(), len(s.Requests()))
			}
			// The transcript keeps the turn of calls as sent; the answer
			// carries no reasoning.
			var turn, answer llm.Message
			for _, m := range res.Messages {
				if len(m.ToolCalls) > 0 {
					turn = m
				}
			}
			answer = res.Messages[len(res.Messages)-1]
			if why := tc.refuse(turn); why != "" {
				t.Errorf("transcript turn %s: %s", mustJSON(t, turn), why)
			}
			if answer.ReasoningContent != nil || answer.Reasoning != nil {
				t.Errorf("answer %s", mustJSON(t, answer))
			}
			var back llm.Message
			if err := json.Unmarshal([]byte(mustJSON(t, turn)), &back); err != nil || tc.refuse(back) != "" {
				t.Errorf("the turn does not survive JSON (checkpoints, journal): %s", mustJSON(t, turn))
			}
		})
	}
}
