package agentrun

import (
	"context"
	"errors"
	"net"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/journal"
	"github.com/jetagent/jetagent/internal/llm"
)

// classify marks errors another attempt may fix (the provider overloaded
// or timing out even after the client's own retries) as jobs.Retryable:
// the job goes back to the queue with a delay and resumes from its
// checkpoint. Everything else fails the job: re-running it would cost
// tokens and repeat tool calls for the same outcome.
func classify(err error) error {
	var api *llm.APIError
	var netErr *net.OpError
	// The kinds another attempt may fix come first: a journal write that
	// ran out of its bound while NATS was away wraps the bound's
	// context.DeadlineExceeded, and must not be taken for the job's own
	// end (which the worker reads from the job's context, not from err,
	// before it looks at Retryable).
	switch {
	case errors.Is(err, journal.ErrUnavailable): // NATS could not store an intent
		return jobs.Retryable(err)
	case errors.Is(err, llm.ErrTimeout), errors.Is(err, llm.ErrConnection):
		return jobs.Retryable(err)
	case errors.As(err, &api) && api.Retryable && api.HasRetryAfter && api.RetryAfter > 0:
		// The provider said when: sooner, the next attempt is refused too.
		return jobs.RetryableAfter(err, api.RetryAfter)
	case errors.As(err, &api) && api.Retryable:
		return jobs.Retryable(err)
	case errors.As(err, &netErr): // the provider is unreachable
		return jobs.Retryable(err)
	case errors.Is(err, agentloop.ErrReplyAbandoned): // finish_reason error or abort
		return jobs.Retryable(err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err // the worker knows why (cancel, timeout, shutdown)
	}
	return err
}
