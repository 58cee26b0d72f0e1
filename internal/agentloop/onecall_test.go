package agentloop_test

import (
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// A server whose chat template takes one call a turn (Llama 3's on vLLM,
// NIM or llama.cpp: "This model only supports single tool-calls at
// once!") gets a turn of parallel calls as one turn per call, each with
// its result. Before: the job failed in the request after the round.
func TestParallelCallsSplitWhenRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		status       int // the refusal's; 0: none
		wantRequests int
	}{
		{"400", 400, 3},
		{"500", 500, 3},
		{"a server taking them", 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, toolReply(call("echo", `{"text":"a"}`), call("echo", `{"text":"b"}`)))
			s.Handle(func(r llmtest.RecordedRequest) llmtest.Reply {
				for _, m := range r.Messages {
					if len(m.ToolCalls) > 1 && tc.status != 0 {
						return llmtest.Reply{Status: tc.status, Content: "This model only supports single tool-calls at once!"}
					}
				}
				return textReply("a and b")
			})
			l := newLoop(t, s, agentloop.Config{})
			res, err := l.Run(t.Context(), agentloop.Input{Task: "go", Tools: tools, Mode: agentloop.ModeFull})
			if err != nil {
				t.Fatal(err)
			}
			reqs := s.Requests()
			if res.Answer != "a and b" || len(reqs) != tc.wantRequests || ts.calls.Load() != 2 {
				t.Fatalf("answer %q, %d requests, %d calls", res.Answer, len(reqs), ts.calls.Load())
			}
			// The transcript keeps the turn as the model made it.
			if m := res.Messages[1]; m.Role != llm.RoleAssistant || len(m.ToolCalls) != 2 {
				t.Errorf("transcript turn %s", mustJSON(t, m))
			}
			if tc.status == 0 {
				return
			}
			sent := reqs[2].Messages
			var shape []string
			for _, m := range sent {
				switch {
				case m.Role == llm.RoleAssistant && len(m.ToolCalls) == 1:
					shape = append(shape, "call "+m.ToolCalls[0].ID)
				case m.Role == llm.RoleTool:
					shape = append(shape, "result "+m.ToolCallID+" "+m.Content)
				default:
					shape = append(shape, m.Role)
				}
			}
			c1, c2 := res.Messages[1].ToolCalls[0].ID, res.Messages[1].ToolCalls[1].ID
			want := []string{"user", "call " + c1, "result " + c1 + " a", "call " + c2, "result " + c2 + " b"}
			if mustJSON(t, shape) != mustJSON(t, want) {
				t.Errorf("sent %v, want %v", shape, want)
			}
		})
	}
}
