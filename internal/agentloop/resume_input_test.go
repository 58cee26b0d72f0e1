package agentloop_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// TestResumeStateChecked: a resume state that no checkpoint of the loop
// can be (no messages, a negative round) is refused with ErrConfig saying
// why, before the model is asked anything; a negative round ran rounds
// numbered -2, -1, 0. Its messages must be a chat history as a job's
// History must (llm.CheckHistory): one that is not went to the model as it
// was, which refuses it (a 400) after the job was taken.
func TestResumeStateChecked(t *testing.T) {
	t.Parallel()
	msgs := []llm.Message{{Role: llm.RoleUser, Content: "go"}}
	for _, tc := range []struct {
		name string
		cp   agentloop.Checkpoint
		want string
	}{
		{"no messages", agentloop.Checkpoint{Round: 1}, "resume state has no messages"},
		{"negative round", agentloop.Checkpoint{Messages: msgs, Round: -3}, "resume state's round -3 is negative"},
		{"result of no call", agentloop.Checkpoint{Round: 1, Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "go"},
			{Role: llm.RoleTool, ToolCallID: "call_1", Content: "72F"},
		}}, `history[1]: a tool result for call "call_1", which no assistant message just before it made`},
		{"unknown role", agentloop.Checkpoint{Round: 1, Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "go"},
			{Role: "robot", Content: "beep"},
		}}, `history[1]: role "robot" is not system`},
		{"call without its result", agentloop.Checkpoint{Round: 1, Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "go"},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_1", Type: "function", Function: llm.FunctionCall{Name: "get_weather", Arguments: "{}"}}}},
			{Role: llm.RoleUser, Content: "and?"},
		}}, `history[1]: call "call_1" (get_weather) has no tool result after it`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, textReply("done"))
			_, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "x", Resume: &tc.cp})
			if !errors.Is(err, agentloop.ErrConfig) || !strings.Contains(fmtErr(err), tc.want) {
				t.Errorf("err = %v, want ErrConfig saying %q", err, tc.want)
			}
			if n := len(s.Requests()); n != 0 {
				t.Errorf("the model was asked %d times", n)
			}
		})
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
