package agentloop

import (
	"fmt"
	"testing"

	"github.com/jetagent/jetagent/internal/llm"
)

// Which refusals are the context window's: a rate limit's words can name
// tokens too (a 429 "too many tokens per minute"), and cutting the
// history for it would lose what the model had read for nothing.
func TestContextExceededStatuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		msg    string
		want   bool
	}{
		{400, "This model's maximum context length is 4096 tokens.", true},
		{413, "prompt is too long: 210000 tokens > 200000 maximum", true},
		{429, "Too many tokens per minute: limit 30000, requested 31000", false},
		{500, "maximum context length exceeded", false},
		{400, "invalid tool schema", false},
	} {
		t.Run(fmt.Sprint(tc.status, tc.msg), func(t *testing.T) {
			t.Parallel()
			err := fmt.Errorf("model: %w", &llm.APIError{Status: tc.status, Message: tc.msg})
			if got := contextExceeded(err); got != tc.want {
				t.Errorf("contextExceeded(%d %q) = %v, want %v", tc.status, tc.msg, got, tc.want)
			}
		})
	}
}
