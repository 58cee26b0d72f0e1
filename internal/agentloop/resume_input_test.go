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
// numbered -2, -1, 0.
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
