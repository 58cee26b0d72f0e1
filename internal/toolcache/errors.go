package toolcache

import (
	"errors"
	"fmt"
)

// Sentinel errors; match with errors.Is.
var (
	// ErrUnknownServer: a job named a server that is not configured (or is disabled).
	ErrUnknownServer = errors.New("toolcache: unknown MCP server")
	// ErrUnknownTool: no tool of that name in the view.
	ErrUnknownTool = errors.New("toolcache: unknown tool")
	// ErrSessionLost: the session broke (process exited, EOF, HTTP session
	// expired) while the request was in flight; the tool may or may not have
	// run. The pool reconnects in the background, so a later call can succeed.
	ErrSessionLost = errors.New("toolcache: MCP session lost")
	// ErrServerUnavailable: the server could not be reached on the last
	// attempt; the pool keeps retrying with backoff.
	ErrServerUnavailable = errors.New("toolcache: MCP server unavailable")
	// ErrClosed: the pool or view is closed.
	ErrClosed = errors.New("toolcache: closed")
)

// RPCError is a JSON-RPC error the server answered with (e.g. unknown tool,
// invalid params). The session stays usable.
type RPCError struct {
	Server  string
	Method  string
	Code    int
	Message string
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("toolcache: server %q: %s: error %d: %s", e.Server, e.Method, e.Code, e.Message)
}
