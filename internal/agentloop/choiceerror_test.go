package agentloop_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// choiceWithError is a completion whose one choice carries an error, as
// OpenRouter's do when the upstream provider failed mid-generation.
func choiceWithError(finish string) llmtest.Reply {
	return llmtest.Reply{Body: `{"id":"gen-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":""},"finish_reason":` + finish + `,"native_finish_reason":null,` +
		`"error":{"code":502,"message":"Upstream error from Chutes: connection reset","metadata":{"provider_name":"Chutes"}}}]}`}
}

// The error a choice carries is the job's error's: it says why the reply
// was abandoned. Before: "the model server abandoned the reply:
// finish_reason \"error\"", and, with no finish reason, "model returned an
// empty response, also when asked again: no text and no tool call",
// neither naming the provider's error.
func TestChoiceErrorNamed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		replies []llmtest.Reply
		wantErr error
		want    string
	}{
		{"finish_reason error", []llmtest.Reply{choiceWithError(`"error"`)}, agentloop.ErrReplyAbandoned,
			`finish_reason "error": 502: Upstream error from Chutes: connection reset`},
		{"no finish reason, twice", []llmtest.Reply{choiceWithError(`null`), choiceWithError(`null`)}, agentloop.ErrEmptyResponse,
			`no text and no tool call, the server's error: 502: Upstream error from Chutes: connection reset`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, tc.replies...)
			_, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "Weather in Lima?"})
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %v with %q", err, tc.wantErr, tc.want)
			}
		})
	}
}
