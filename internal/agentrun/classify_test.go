package agentrun

import (
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm"
)

// A provider's Retry-After reaches the worker's hand-back delay: the job
// went back after the worker's own backoff (seconds) and used up its
// deliveries within an hour-long rate limit.
func TestClassifyKeepsRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		err       *llm.APIError
		retryable bool
		after     time.Duration
	}{
		{"429 with Retry-After", &llm.APIError{Status: 429, Retryable: true, HasRetryAfter: true, RetryAfter: time.Hour}, true, time.Hour},
		{"429 without", &llm.APIError{Status: 429, Retryable: true}, true, 0},
		{"Retry-After 0", &llm.APIError{Status: 503, Retryable: true, HasRetryAfter: true}, true, 0},
		{"400 with Retry-After", &llm.APIError{Status: 400, HasRetryAfter: true, RetryAfter: time.Minute}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := classify(tc.err)
			if jobs.IsRetryable(err) != tc.retryable || jobs.RetryAfterOf(err) != tc.after {
				t.Errorf("classify = %v: retryable %v after %s, want %v after %s", err, jobs.IsRetryable(err), jobs.RetryAfterOf(err), tc.retryable, tc.after)
			}
		})
	}
}
