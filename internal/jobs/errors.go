package jobs

import (
	"errors"
	"time"
)

// Sentinel errors.
var (
	// ErrConfig wraps every invalid configuration.
	ErrConfig = errors.New("jobs: invalid configuration")

	// ErrRejected wraps every reason a job is refused at the door; the
	// reasons below wrap it, so errors.Is(err, ErrRejected) finds them all.
	ErrRejected = errors.New("job rejected")
	// ErrNotJSON: the payload is not a JSON document.
	ErrNotJSON = reject("job is not JSON")
	// ErrSchema: the payload fails schemas/job.schema.json.
	ErrSchema = reject("job fails schemas/job.schema.json")
	// ErrTooLarge: the payload exceeds the configured size limit.
	ErrTooLarge = reject("job too large")
	// ErrUnknownServer: the job names an MCP server the operator did not configure.
	ErrUnknownServer = reject("job names an MCP server this worker does not configure")

	// ErrNotFound: no state (or transcript) for that job id.
	ErrNotFound = errors.New("job not found")
	// ErrConflict: a state transition lost a compare-and-swap race, or the
	// transition is not allowed from the current status.
	ErrConflict = errors.New("job state conflict")
)

type rejectError struct{ msg string }

func (e *rejectError) Error() string        { return e.msg }
func (e *rejectError) Is(target error) bool { return target == ErrRejected }

func reject(msg string) error { return &rejectError{msg: msg} }

// retryable marks a runner error worth another attempt; after, when
// positive, is the least delay before it (the provider's Retry-After).
type retryable struct {
	err   error
	after time.Duration
}

func (r retryable) Error() string { return r.err.Error() }
func (r retryable) Unwrap() error { return r.err }

// Retryable marks err as transient: the worker hands the job back with a
// backoff delay instead of failing it, until MaxDeliver is reached (then
// the job is dead-lettered). Runner errors not marked fail the job at once,
// because re-running an agent job costs tokens and repeats tool calls.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return retryable{err: err}
}

// RetryableAfter is Retryable with the least delay before the next
// attempt: the wait a rate-limited provider asked for (Retry-After), which
// the worker's own backoff (seconds) would not respect, so that a job
// used up its deliveries within the provider's wait and was
// dead-lettered. The worker waits the longer of its backoff and after,
// at most MaxRetryAfter.
func RetryableAfter(err error, after time.Duration) error {
	if err == nil {
		return nil
	}
	return retryable{err: err, after: after}
}

// MaxRetryAfter bounds the wait RetryableAfter asks for: a provider's
// Retry-After of a day must not park a job for a day.
const MaxRetryAfter = time.Hour

// IsRetryable reports whether err was marked with Retryable.
func IsRetryable(err error) bool {
	var r retryable
	return errors.As(err, &r)
}

// RetryAfterOf is the least delay RetryableAfter gave err, bounded by
// MaxRetryAfter (0: none).
func RetryAfterOf(err error) time.Duration {
	var r retryable
	if !errors.As(err, &r) || r.after <= 0 {
		return 0
	}
	return min(r.after, MaxRetryAfter)
}
