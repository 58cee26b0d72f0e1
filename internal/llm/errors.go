package llm

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

var (
	// ErrNonRetryable marks errors that another attempt would not fix: an
	// API error such as 400/401/404, or a request that cannot be encoded.
	ErrNonRetryable = errors.New("llm: non-retryable error")
	// ErrNoChoices is returned when a 200 reply carries no choices.
	ErrNoChoices = errors.New("llm: response has no choices")
	// ErrTimeout marks an attempt that ran out of Config.Timeout. It is
	// deliberately not context.DeadlineExceeded, which means the caller's
	// own deadline.
	ErrTimeout = errors.New("llm: request timed out")
)

// APIError is an HTTP error reply from the provider.
type APIError struct {
	Status int
	// Message is the provider's own message ("error.message", or the body
	// when it is not OpenAI-shaped).
	Message string
	// Type and Code are the provider's "error.type" and "error.code", if any.
	Type, Code string
	// Retryable reports whether the status (or x-should-retry) allows a retry.
	Retryable bool
	// RetryAfter is the wait the provider asked for (see HasRetryAfter).
	RetryAfter time.Duration
	// HasRetryAfter tells "retry after 0" from no header at all.
	HasRetryAfter bool
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("llm: provider returned %d: %s", e.Status, msg)
}

// Is makes errors.Is(err, ErrNonRetryable) true for non-retryable API errors.
func (e *APIError) Is(target error) bool { return target == ErrNonRetryable && !e.Retryable }

// retryableStatus mirrors openai-go's own policy: timeouts, lock conflicts,
// rate limits and server errors.
func retryableStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500
}

// retryAfter reads retry-after-ms, then Retry-After (seconds or HTTP date);
// ok is false when neither is present and valid.
func retryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true // a date already past means now
	}
	return 0, false
}

// nonRetryable wraps err so that errors.Is(result, ErrNonRetryable) holds.
func nonRetryable(err error) error {
	return fmt.Errorf("%w (%w)", err, ErrNonRetryable)
}
