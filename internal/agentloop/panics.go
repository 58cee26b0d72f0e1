package agentloop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"unicode/utf8"

	"github.com/jetagent/jetagent/internal/journal"
	"github.com/jetagent/jetagent/internal/reflect"
)

// A panic in a goroutine the loop starts for a call (execute runs each
// call of a round in its own) would end the worker's process and every
// job on it: the worker recovers only the panics of the runner's own
// goroutine (jobs.Worker.callRunner). So each call recovers its own:
//
//   - runEffect, inside the journal's Do, turns a panic of the tool's run
//     (the MCP session, the client-tool caller, a resource read, the
//     output check) into the run's error: the journal records the call
//     completed with that error, as any failed call, so an attempt that
//     resumes the round replays the error and does not run it again;
//   - effect turns a panic of the journal itself (its store) into
//     journal.ErrUnavailable, which ends the attempt as a store that
//     fails does;
//   - dispatchSafe turns a panic of any other part of a call (the meta
//     tools search_tools and get_tool_details, call_tool, execute_code's
//     host) into that call's error;
//   - execute's goroutine recovers what is left (run1's publishing of the
//     result: a panicking Sink), keeping a result the call already has.
//
// The model gets the panic value (cut short), never the stack; the log
// (Config.Logger) gets a short stack. A panic value can quote what the
// panicking code held (a request's URL with its ?api_key=, a header):
// when the job's ToolSet masks secrets (secretMasker), the value the
// model, the events, the journal and the log get is masked first, as the
// ToolSet masks its calls' own errors.

// secretMasker is a ToolSet that masks, in any text, the credentials it
// was configured with (for toolcache.View: its pool's servers' secrets,
// which it masks in its calls' errors). The loop masks with it what it
// shows of a recovered panic: the panic bypassed the ToolSet's own
// masking of its errors.
type secretMasker interface {
	MaskSecrets(s string) string
}

// panicValueMax bounds the panic value a call's error quotes.
const panicValueMax = 500

// panicStackFrames bounds the frames of a logged panic's stack.
const panicStackFrames = 12

// panicError is the error of a call whose run panicked.
type panicError struct {
	tool  string
	value any
	mask  func(string) string // nil: none
}

func (e *panicError) Error() string {
	v := fmt.Sprint(e.value)
	if e.mask != nil {
		v = e.mask(v) // before the cut, which could leave a secret's head
	}
	if len(v) > panicValueMax {
		cut := panicValueMax
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		v = v[:cut] + fmt.Sprintf("... (%d bytes)", len(v))
	}
	return fmt.Sprintf("the call of %s failed inside the worker: %s", e.tool, v)
}

// panicErr is the error of a call of tool whose run panicked with p.
func (j *job) panicErr(tool string, p any) *panicError {
	return &panicError{tool: tool, value: p, mask: j.maskSecrets}
}

// maskSecrets is s with the job's ToolSet's secrets masked (secretMasker);
// s when it masks none.
func (j *job) maskSecrets(s string) string {
	if m, ok := j.in.Tools.(secretMasker); ok {
		return m.MaskSecrets(s)
	}
	return s
}

// buildPanicError is the error of a build of a job's tools (the catalog:
// the ToolSet's listing; a mode's tools array and its count) that
// panicked (safely). A shared build knows no job, and the value can quote
// what the ToolSet was configured with (a server's URL): each job masks
// it with its own ToolSet's secrets (maskBuildPanic) before it is the
// job's error, which goes to the job's reason and events.
type buildPanicError struct {
	value any
	mask  func(string) string // nil: none
}

func (e *buildPanicError) Error() string {
	v := fmt.Sprint(e.value)
	if e.mask != nil {
		v = e.mask(v)
	}
	return "agentloop: building the tools panicked: " + v
}

// maskBuildPanic is err masked with the job's ToolSet's secrets when it
// is a build's panic; err otherwise.
func (j *job) maskBuildPanic(err error) error {
	var bp *buildPanicError
	if errors.As(err, &bp) {
		return &buildPanicError{value: bp.value, mask: j.maskSecrets}
	}
	return err
}

// logger is the loop's logger (Config.Logger, else slog's default).
func (l *Loop) logger() *slog.Logger {
	if l.cfg.Logger != nil {
		return l.cfg.Logger
	}
	return slog.Default()
}

// logPanic logs a recovered panic with a short stack. It is called from
// the deferred function that recovered it, so the stack is the
// panicking goroutine's.
func (j *job) logPanic(what, tool string, p any, attrs ...any) {
	attrs = append([]any{"job_id", j.in.JobID, "tool", tool, "in", what}, attrs...)
	attrs = append(attrs, "panic", j.maskSecrets(fmt.Sprint(p)), "stack", shortStack())
	j.l.logger().Error("recovered a panic of a tool call inside the worker", attrs...)
}

// shortStack is the stack of the goroutine calling it, from the frame
// that panicked (after runtime.gopanic: not the recovering functions),
// runtime frames left out, at most panicStackFrames.
func shortStack() string {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs) // runtime.Callers, shortStack, logPanic
	frames := runtime.CallersFrames(pcs[:n])
	var lines []string
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			lines = lines[:0] // the recovering functions
		case f.Function != "" && !strings.HasPrefix(f.Function, "runtime."):
			lines = append(lines, fmt.Sprintf("%s %s:%d", f.Function, f.File, f.Line))
		}
		if !more {
			break
		}
	}
	if len(lines) > panicStackFrames {
		lines = append(lines[:panicStackFrames], "...")
	}
	return strings.Join(lines, "\n")
}

// recoverJournal is effect's recover (deferred): a panic of the journal
// (its store) is a journal that cannot be written, which ends the
// attempt; whether the call ran is then what the journal holds.
func (j *job) recoverJournal(c *call, err *error) {
	p := recover()
	if p == nil {
		return
	}
	j.logPanic("journal", toolName(c.target, c.tc.Function.Name), p, "call_id", c.tc.ID, "key", c.key)
	c.fatal = fmt.Errorf("%w: %s: the journal failed inside the worker: %s", journal.ErrUnavailable, c.key, j.maskSecrets(fmt.Sprint(p)))
	*err = c.fatal
}

// recoverRun is runEffect's recover (deferred): a panic of the run
// becomes its error.
func (j *job) recoverRun(ctx context.Context, tool string, err *error) {
	p := recover()
	if p == nil {
		return
	}
	j.logPanic("tool run", tool, p, "idempotency_key", journal.KeyFromContext(ctx))
	*err = j.panicErr(tool, p)
}

// dispatchSafe is dispatch of c (direct) with a panic turned into c's
// error, recorded as dispatch records a failed call.
func (j *job) dispatchSafe(ctx context.Context, c *call) (out string, isErr bool) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		j.logPanic("dispatch", c.tc.Function.Name, p, "call_id", c.tc.ID)
		out, isErr = "Error: "+j.panicErr(toolName(c.target, c.tc.Function.Name), p).Error(), true
		j.recordFailed(c, out)
	}()
	return j.dispatch(ctx, c.tc.ID, c.entry, c.args, false, c)
}

// recordFailed gives c the record dispatch would have given it, failed
// with out, when the panic came before dispatch made it.
func (j *job) recordFailed(c *call, out string) {
	if c.record != nil || c.entry == nil || c.target == nil {
		if c.record != nil {
			c.record.Output, c.record.IsError = &out, true
		}
		return
	}
	switch c.entry.kind {
	case kindCallTool:
		c.record = &reflect.Record{ID: c.tc.ID, CallID: c.tc.ID, Kind: reflect.KindCallTool,
			Name: c.target.tool.Name, Input: c.targetArgs, Output: &out, IsError: true}
	case kindClient:
		c.record = &reflect.Record{ID: c.tc.ID, CallID: c.tc.ID, Kind: reflect.KindClientTool,
			Name: c.entry.tool.Name, Input: c.args, Output: &out, IsError: true}
	}
}

// recoverCall is the last recover of a call's goroutine (deferred in
// execute): a panic outside the call's run and dispatch (its result's
// publishing) keeps the result the call has, or fails it.
func (j *job) recoverCall(c *call) {
	p := recover()
	if p == nil {
		return
	}
	j.logPanic("call", c.tc.Function.Name, p, "call_id", c.tc.ID)
	if c.forModel != "" {
		return // the call's result is made; only its publishing failed
	}
	c.output, c.isError = "Error: "+j.panicErr(toolName(c.target, c.tc.Function.Name), p).Error(), true
	c.forModel = truncate(c.output, j.l.cfg.MaxToolOutput)
	j.recordFailed(c, c.forModel)
}
