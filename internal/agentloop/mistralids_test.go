package agentloop_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// Mistral's API (and mistral_common behind vLLM, LiteLLM and mlx servers)
// refuses a request holding a call id that is not 9 letters or digits.
// Such ids come from a continuation's history made on another provider
// (OpenAI's "call_" and 24 characters), and from proxies that make up
// ids of their own for Mistral's calls and send them back. The request
// is sent again with those ids replaced, in the calls and their results,
// and so is every later request of the job; the transcript keeps the ids
// as they were. Before: the job failed with "provider returned 400: Tool
// call id was call_PTLP8xhu3uwZk4l3nlnrrJha but must be a-z, A-Z, 0-9,
// with a length of 9." (a continuation at its first request, a proxy's
// ids at the request after the first round).
func TestMistralCallIDsReplaced(t *testing.T) {
	t.Parallel()
	openAIID := "call_PTLP8xhu3uwZk4l3nlnrrJha"
	history := []llm.Message{
		{Role: llm.RoleUser, Content: "Weather in Lima?"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: openAIID, Type: "function", Function: llm.FunctionCall{Name: "get_weather", Arguments: `{"city":"Lima"}`}}}},
		{Role: llm.RoleTool, ToolCallID: openAIID, Content: "weather in Lima: 21c, sunny"},
		{Role: llm.RoleAssistant, Content: "Sunny."},
	}
	for _, tc := range []struct {
		name      string
		history   []llm.Message
		replies   []llmtest.Reply // answered before the Mistral handler
		maxRounds int
		// wantRequests: the refused request and its rewrite are both counted.
		wantRequests int
		wantStop     string
		// wantIDs are the ids of the transcript's calls, as they came.
		wantIDs []string
	}{
		{name: "a continuation's history from OpenAI", history: history,
			replies:      []llmtest.Reply{rawReply(rawCalls(rawCall("abcDEF123", "echo", `"{\"text\":\"a\"}"`)), "tool_calls")},
			wantRequests: 3, wantStop: agentloop.StopFinalAnswer, wantIDs: []string{openAIID, "abcDEF123"}},
		{name: "a proxy's own ids",
			replies: []llmtest.Reply{rawReply(rawCalls(rawCall("chatcmpl-tool-5f2a", "echo", `"{\"text\":\"a\"}"`),
				rawCall("chatcmpl-tool-9c1d", "echo", `"{\"text\":\"b\"}"`)), "tool_calls")},
			wantRequests: 3, wantStop: agentloop.StopFinalAnswer, wantIDs: []string{"chatcmpl-tool-5f2a", "chatcmpl-tool-9c1d"}},
		// The final request's note after tool results is refused too: both
		// rewrites, in the order the server refuses them.
		{name: "a proxy's ids and the final note", maxRounds: 1,
			replies:      []llmtest.Reply{rawReply(rawCalls(rawCall("chatcmpl-tool-5f2a", "echo", `"{\"text\":\"a\"}"`)), "tool_calls")},
			wantRequests: 4, wantStop: agentloop.StopMaxRounds, wantIDs: []string{"chatcmpl-tool-5f2a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t)
			replies := tc.replies
			s.Handle(func(r llmtest.RecordedRequest) llmtest.Reply {
				if refused := mistralIDs(llmtest.Reply{Content: "ok"})(r); refused.Status != 0 {
					return refused
				}
				return mistralOrder(func(llmtest.RecordedRequest) llmtest.Reply {
					if len(replies) > 0 {
						next := replies[0]
						replies = replies[1:]
						return next
					}
					return textReply("Done.")
				})(r)
			})
			res, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "Echo a and b.", History: tc.history,
				MaxRounds: tc.maxRounds, Mode: agentloop.ModeFull, Tools: tools})
			if err != nil {
				t.Fatal(err)
			}
			if res.Answer != "Done." || res.StopReason != tc.wantStop {
				t.Errorf("answer %q, stop %q", res.Answer, res.StopReason)
			}
			reqs := s.Requests()
			if len(reqs) != tc.wantRequests {
				t.Errorf("%d requests, want %d", len(reqs), tc.wantRequests)
			}
			// The last request went through: each call answered under its
			// new id.
			last := reqs[len(reqs)-1].Messages
			ok := regexp.MustCompile(`^[a-zA-Z0-9]{9}$`)
			results := map[string]bool{}
			for _, m := range last {
				if m.Role == llm.RoleTool {
					results[m.ToolCallID] = true
				}
			}
			for _, m := range last {
				for _, c := range m.ToolCalls {
					if !ok.MatchString(c.ID) || !results[c.ID] {
						t.Errorf("sent call id %q (answered: %v)", c.ID, results[c.ID])
					}
				}
			}
			var ids []string
			for _, m := range res.Messages {
				for _, c := range m.ToolCalls {
					ids = append(ids, c.ID)
				}
			}
			if strings.Join(ids, " ") != strings.Join(tc.wantIDs, " ") {
				t.Errorf("transcript call ids %q, want %q", ids, tc.wantIDs)
			}
		})
	}
}
