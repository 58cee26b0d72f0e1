package agentloop_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// A continuation's history (a stored transcript) starts with the earlier
// job's system prompt; the model must get one system prompt, not two.
func TestHistorySystemPrompt(t *testing.T) {
	t.Parallel()
	earlier := []llm.Message{
		{Role: llm.RoleSystem, Content: "old prompt"},
		{Role: llm.RoleUser, Content: "before"},
		{Role: llm.RoleAssistant, Content: "earlier answer"},
	}
	tests := []struct {
		name    string
		system  string
		history []llm.Message
		want    string // the roles and system contents the model receives
	}{
		{"job prompt supersedes the history's", "new prompt", earlier, "system:new prompt user assistant user"},
		{"history's prompt kept without a job prompt", "", earlier, "system:old prompt user assistant user"},
		{"history without a prompt", "new prompt", earlier[1:], "system:new prompt user assistant user"},
		{"no prompt at all", "", earlier[1:], "user assistant user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, textReply("done"))
			l := newLoop(t, s, agentloop.Config{})
			if _, err := l.Run(context.Background(), agentloop.Input{Task: "now", System: tt.system, History: tt.history}); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range s.Requests()[0].Messages {
				if m.Role == llm.RoleSystem {
					got = append(got, "system:"+m.Content)
				} else {
					got = append(got, m.Role)
				}
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("model received %q, want %q", strings.Join(got, " "), tt.want)
			}
		})
	}
}
