package agentloop_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// A reply of reasoning alone, which a server's reasoning parser moved out
// of the content (vLLM, llama.cpp, DeepSeek, Ollama, OpenRouter), is named
// so when it ends the job. Before: "no text and no tool call".
func TestReasoningAloneNamed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, message, want string
	}{
		{"reasoning_content", `{"role":"assistant","content":"","reasoning_content":"Let me think about Lima."}`,
			"only reasoning (in the reply's reasoning field), no answer"},
		{"reasoning", `{"role":"assistant","content":null,"reasoning":"Lima..."}`,
			"only reasoning (in the reply's reasoning field), no answer"},
		{"nothing at all", `{"role":"assistant","content":null}`, "no text and no tool call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, rawReply(tc.message, "stop"), rawReply(tc.message, "stop"))
			l := newLoop(t, s, agentloop.Config{})
			res, err := l.Run(t.Context(), agentloop.Input{Task: "Weather in Lima?"})
			if !errors.Is(err, agentloop.ErrEmptyResponse) || res.StopReason != agentloop.StopError || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v (stop %s), want ErrEmptyResponse saying %q", err, res.StopReason, tc.want)
			}
			if n := len(s.Requests()); n != 2 {
				t.Errorf("%d requests, want 2 (one nudge)", n)
			}
		})
	}
}
