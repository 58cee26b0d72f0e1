package toolcache

import (
	"errors"
	"fmt"
)

// Error messages get the package prefix exactly once: every exported
// function or method that returns an error from the session layer says
// "toolcache: <what it was doing>: " (opError), and nothing below it, nor the
// sentinels and RPCError, writes "toolcache:". Causes are wrapped, never
// flattened ("%w ... %w"), so errors.Is finds both the sentinel and the cause
// (context.DeadlineExceeded, transport.ErrSessionTerminated, ...).
// Configuration errors are the exception, as in jetagent's other libraries:
// they start with "toolcache: " themselves (ErrConfig, Config.Validate) and
// are returned as they are.

// Sentinel errors; match with errors.Is.
var (
	// ErrUnknownServer: a job named a server that is not configured (or is disabled).
	ErrUnknownServer = errors.New("unknown MCP server")
	// ErrUnknownTool: no tool of that name in the view.
	ErrUnknownTool = errors.New("unknown tool")
	// ErrSessionLost: the session broke (process exited, EOF, HTTP session
	// expired, health checks unanswered) while the request was in flight; the
	// tool may or may not have run. The pool reconnects in the background, so
	// a later call can succeed.
	ErrSessionLost = errors.New("MCP session lost")
	// ErrServerUnavailable: the server could not be reached on the last
	// attempt; the pool keeps retrying with backoff. The attempt's error is
	// wrapped too (e.g. context.DeadlineExceeded for a connect timeout).
	ErrServerUnavailable = errors.New("MCP server unavailable")
	// ErrClosed: the pool or view is closed.
	ErrClosed = errors.New("closed")
	// ErrConfig: invalid Settings; the error is a *cfgerr.FieldError naming
	// the field.
	ErrConfig = errors.New("toolcache: invalid configuration")
)

// notSentError is the error of a call that was never sent (its session
// broke while it waited for a free slot): View.callOn sends it on the
// next session.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// RPCError is a JSON-RPC error the server answered with (e.g. unknown tool,
// invalid params). The session stays usable.
type RPCError struct {
	Server  string
	Method  string
	Code    int
	Message string
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("server %q: %s: error %d: %s", e.Server, e.Method, e.Code, e.Message)
}

// opError is err as an exported function returns it: prefixed once with the
// package and what was being done.
func opError(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("toolcache: %s: %w", op, err)
}
