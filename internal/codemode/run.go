package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dop251/goja"
)

// Result is the result of one inner call, as the Host returns it.
type Result struct {
	Text       string          // the text content
	Structured json.RawMessage // the structured content, if any
	IsError    bool            // the tool reported an error; Text is its message
}

// Host is what an execution needs from its caller (the agent loop).
//
// Run calls the Host from one goroutine at a time, never after Run has
// returned, and in an order that depends only on the code and on what the
// Host returned before: a replay that returns the same values takes the
// same path.
type Host interface {
	// Call runs inner call number seq (0, 1, 2, ... in the order the code
	// makes them) of the tool name with args, a JSON object. A returned
	// error is a refusal (validation failed, denied, ...): the code sees an
	// Error with the error's text, which it may catch. An error made with
	// Abort ends the execution instead (a replay that diverged, a journal
	// that cannot be written). ctx is done when the execution is stopped;
	// Call must then return promptly.
	Call(ctx context.Context, seq int, name string, args json.RawMessage) (Result, error)
	// Now supplies the value of the seq-th clock read (Date.now(), new
	// Date(), Date()): milliseconds since the Unix epoch.
	Now(seq int) int64
	// Random supplies the seq-th Math.random() value, in [0, 1) (other
	// values are replaced by 0). Now and Random count separately.
	Random(seq int) float64
}

// Explainer is a Host that can say why a name the code reached for on
// tools is not one of the execution's tools (the tool's server is down,
// it was added after the catalog was made): the code's TypeError then
// carries that reason. A Host without it, or an empty answer, leaves the
// plain "not a tool of this job". Explain is called like Call (one
// goroutine at a time, never after Run returned) but counts as no call.
type Explainer interface {
	Explain(name string) string
}

// Abort wraps err so that, returned by Host.Call, it ends the execution
// rather than being thrown to the code. Output.Err then wraps err.
func Abort(err error) error {
	if err == nil {
		return nil
	}
	return &abortError{err}
}

type abortError struct{ err error }

func (e *abortError) Error() string { return e.err.Error() }
func (e *abortError) Unwrap() error { return e.err }

// Limits bound one execution. A zero field takes its default (DefaultLimits).
type Limits struct {
	// WallTime bounds the whole execution, tool calls included.
	WallTime time.Duration
	// MaxCalls is the number of tool calls allowed; the next one ends the
	// execution.
	MaxCalls int
	// MaxOutput bounds Output.Text in bytes (what console printed and the
	// final value); what does not fit is cut with a marker.
	MaxOutput int
	// MaxStackDepth is the deepest JavaScript call stack, in frames.
	MaxStackDepth int
	// MaxMemory bounds, in bytes, how much the process's live Go heap may
	// grow while the execution runs (twice that counting garbage), and
	// sizes the guards on built-ins. goja has no memory accounting, so
	// this is a process-wide approximation; see the package documentation.
	MaxMemory int64
	// MaxCode bounds the size of the code in bytes.
	MaxCode int
	// MaxValues bounds the clock reads and random values of one execution
	// (Host.Now and Host.Random calls together); the next one ends it.
	// The agent loop journals each durably, so a loop on Date.now() (a
	// busy wait: code mode has no timers) wrote entries without end.
	MaxValues int

	// grace is how long Run waits for a stopped runtime to notice before
	// abandoning it; tests shorten it.
	grace time.Duration
	// hook, when set, runs after the prelude (tests add natives with it).
	hook func(*goja.Runtime)
	// wall, when set, is the wall time limit in place of a WallTime timer:
	// it is reached when wall delivers or is closed, so that a test
	// reaches it after an event rather than after a duration a slow
	// machine may spend setting the runtime up. WallTime still names it.
	wall <-chan time.Time
	// exited, when set, is called once the runtime's goroutine has
	// returned, abandoned or not (tests wait on it).
	exited func()
	// guardMemory, when set, sizes the built-in guards instead of
	// MaxMemory (tests use small guards without a small memory limit).
	guardMemory int64
}

// DefaultLimits are the limits of a zero Limits field.
var DefaultLimits = Limits{
	WallTime:      30 * time.Second,
	MaxCalls:      200,
	MaxOutput:     20_000,
	MaxStackDepth: 1000,
	MaxMemory:     256 << 20,
	MaxCode:       64 << 10,
	MaxValues:     10_000,
}

// abandonGrace is how long a runtime that was told to stop may keep
// running inside a native built-in before Run returns without it.
const abandonGrace = 2 * time.Second

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.WallTime <= 0 {
		l.WallTime = d.WallTime
	}
	if l.MaxCalls <= 0 {
		l.MaxCalls = d.MaxCalls
	}
	if l.MaxOutput <= 0 {
		l.MaxOutput = d.MaxOutput
	}
	if l.MaxStackDepth <= 0 {
		l.MaxStackDepth = d.MaxStackDepth
	}
	if l.MaxMemory <= 0 {
		l.MaxMemory = d.MaxMemory
	}
	if l.MaxCode <= 0 {
		l.MaxCode = d.MaxCode
	}
	if l.MaxValues <= 0 {
		l.MaxValues = d.MaxValues
	}
	if l.grace <= 0 {
		l.grace = abandonGrace
	}
	return l
}

// Output is the outcome of one execution.
type Output struct {
	// Text is what console printed, one line per call, then the final
	// value (the value the code returns, or of its last expression
	// statement), at most MaxOutput bytes, cut with a
	// "[output truncated: ...]" marker. It is kept when Err is set.
	Text string
	// Calls is the number of tool calls made (Host.Call invocations).
	Calls int
	// Err is nil on success, else a message for the model: an uncaught
	// error, a syntax error, a limit (*LimitError), a cancellation
	// (wrapping the context's error) or an Abort (wrapping its error).
	Err error
}

// ErrLimit is matched (errors.Is) by every *LimitError.
var ErrLimit = errors.New("codemode: limit reached")

// LimitError ends an execution that reached a limit.
type LimitError struct {
	Limit   string // "wall time", "tool calls", "memory", "call stack", "code size", "clock and random values"
	Message string // for the model
}

func (e *LimitError) Error() string        { return e.Message }
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

func limitErr(limit, format string, args ...any) *LimitError {
	return &LimitError{Limit: limit, Message: fmt.Sprintf(format, args...)}
}

// Run executes code, the body of an async JavaScript function, in a fresh
// runtime where tools has one async function per tool of the catalog.
// Each execution is independent; concurrent Runs are safe. Run does not
// panic: a failure of any kind is in Output.Err.
func (c *Catalog) Run(ctx context.Context, code string, host Host, lim Limits) Output {
	lim = lim.withDefaults()
	s := newSession(ctx, c, host, lim)
	return s.run(code)
}
