package agentloop_test

import (
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// A continuation's history from another system may hold a call whose
// arguments are not one JSON object: "" for a tool without parameters, a
// call cut off at the token limit. It is sent with {} in their place, as
// the loop keeps its own such calls; the job's input is not modified.
// Before: Ollama, vLLM and llama.cpp refused the first request ("provider
// returned 400: invalid tool call arguments"), failing the job.
func TestHistoryArgumentsSentAsObjects(t *testing.T) {
	t.Parallel()
	turn := func(id, args string) []llm.Message {
		return []llm.Message{
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: id, Type: "function", Function: llm.FunctionCall{Name: "fail", Arguments: args}}}},
			{Role: llm.RoleTool, ToolCallID: id, Content: "Error: the backend is down"},
		}
	}
	history := []llm.Message{{Role: llm.RoleUser, Content: "Try the backend."}}
	history = append(history, turn("a1", "")...)
	history = append(history, turn("a2", `{"x":`)...)
	history = append(history, turn("a3", `{"x":1}`)...)
	history = append(history, llm.Message{Role: llm.RoleAssistant, Content: "It is down."})
	orig := mustJSON(t, history)
	s := llmtest.NewServer(t)
	s.Handle(strictHistory("Still down."))
	res, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "And now?", History: history})
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "Still down." {
		t.Errorf("answer %q", res.Answer)
	}
	var sent []string
	for _, m := range s.Requests()[0].Messages {
		for _, c := range m.ToolCalls {
			sent = append(sent, c.Function.Arguments)
		}
	}
	if got := mustJSON(t, sent); got != `["{}","{}","{\"x\":1}"]` {
		t.Errorf("sent arguments %s", got)
	}
	if mustJSON(t, history) != orig {
		t.Errorf("the job's history was modified: %s", mustJSON(t, history))
	}
}
