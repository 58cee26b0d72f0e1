package codemode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Runner runs one execution of code against a catalog's tools. A nil
// Runner in a caller's configuration means Catalog.Run, in process.
type Runner interface {
	Run(ctx context.Context, c *Catalog, code string, host Host, lim Limits) Output
}

// ChildEnv is the environment variable that makes a binary serve one
// execution for a Process runner: its main (or TestMain) calls
// ServeChild first thing when it is set (IsChild).
const ChildEnv = "JETAGENT_CODEMODE_CHILD"

// IsChild reports whether this process was started by a Process runner.
func IsChild() bool { return os.Getenv(ChildEnv) == "1" }

// Process runs each execution in a child process: the binary at Path
// (whose main calls ServeChild when IsChild) runs Catalog.Run there, and
// its Host calls come back over the child's stdin and stdout to the Host
// given to Run, in this process.
//
// Why: a few steps of goja are native and cannot be interrupted or
// bounded (the package documentation's "What remains": the TypeError for
// an object with no primitive value formats gigabytes from a few
// properties). In process, such a script ends the worker and every job
// it runs; in a child, only the child dies, under an address-space limit
// (RLIMIT_AS, not under the race detector, whose shadow memory it would
// refuse) of 8 x MaxMemory + 256 MiB beyond the runtime's own
// reservations, and the call ends with a memory
// error. The memory watchdog then measures the script's own heap, not
// the other jobs', and a child stuck inside a built-in is killed rather
// than left holding a CPU. The cost is a process start per execution
// (BenchmarkProcessRun).
type Process struct {
	// Path is the executable to start; empty means this process's own
	// (/proc/self/exe on Linux, else os.Executable).
	Path string
	// Args are its arguments, after the program name.
	Args []string
}

// procSlack is how long after the wall time and the grace period a child
// that has not answered is killed: its own watchdog reports the wall time
// first, unless it is stuck; the slack covers its start on a busy machine.
const procSlack = 10 * time.Second

// maxStderr is how much of a child's standard error is kept for the
// error message (a fatal error's first lines).
const maxStderr = 4 << 10

// Run implements Runner.
func (p Process) Run(ctx context.Context, c *Catalog, code string, host Host, lim Limits) Output {
	lim = lim.withDefaults()
	if len(code) > lim.MaxCode { // no process for code that cannot run
		return Output{Err: limitErr("code size", "the code is %d bytes, over the limit of %d bytes", len(code), lim.MaxCode)}
	}
	path := p.Path
	if path == "" && runtime.GOOS == "linux" {
		// The running binary itself, even when its file was replaced
		// (an upgrade in place) or removed: a child of another version
		// could speak another wire.
		path = "/proc/self/exe"
	}
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return Output{Err: fmt.Errorf("code mode: cannot start the code's process: %w", err)}
		}
		path = exe
	}
	start, err := marshalFrame(childStart{Tools: c.Tools(), Code: code, Limits: exportLimits(lim)})
	if err != nil {
		return Output{Err: fmt.Errorf("code mode: %w", err)}
	}
	cmd := exec.Command(path, p.Args...)
	cmd.Env = childEnv()
	stderr := &headBuffer{max: maxStderr}
	cmd.Stderr = stderr
	// Pipes of our own rather than StdinPipe/StdoutPipe, so that Wait can
	// run beside the reads.
	inR, inW, err := os.Pipe()
	if err != nil {
		return Output{Err: fmt.Errorf("code mode: cannot start the code's process: %w", err)}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		_ = inR.Close()
		_ = inW.Close()
		return Output{Err: fmt.Errorf("code mode: cannot start the code's process: %w", err)}
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	_ = inR.Close()
	_ = outW.Close()
	if err != nil {
		_ = inW.Close()
		_ = outR.Close()
		return Output{Err: fmt.Errorf("code mode: cannot start the code's process %s: %w", path, err)}
	}
	pc := &procCall{ctx: ctx, host: host, lim: lim, cmd: cmd, stdin: inW, stderr: stderr, exited: make(chan struct{})}
	go func() {
		pc.werr = cmd.Wait()
		close(pc.exited)
	}()
	defer func() {
		_ = inW.Close() // a child still running ends at its stdin's end...
		select {
		case <-pc.exited:
		case <-time.After(pc.lim.grace): // ...or is killed
			_ = cmd.Process.Kill()
			<-pc.exited
		}
		_ = outR.Close()
	}()
	return pc.serve(start, outR)
}

// procCall is one execution in a child process, seen from the parent.
type procCall struct {
	ctx    context.Context
	host   Host
	lim    Limits
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *headBuffer
	abort  error         // the Host's last Abort error
	exited chan struct{} // closed when the child has exited
	werr   error         // Wait's error, once exited is closed
}

// callDone is a Host.Call's outcome, for the serving loop.
type callDone struct {
	res Result
	err error
}

func (pc *procCall) serve(start []byte, stdout io.Reader) Output {
	frames := make(chan frame)
	readErr := make(chan error, 1)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		r := bufio.NewReaderSize(stdout, 64<<10)
		limit := int(max(64<<20, 2*pc.lim.MaxMemory))
		for {
			f, err := readFrame(r, limit)
			if err != nil {
				readErr <- err
				return
			}
			select {
			case frames <- f:
			case <-quit:
				return
			}
		}
	}()
	var calls int
	_ = writeFrame(pc.stdin, start) // a child that died is told by the reader

	kill := time.NewTimer(pc.lim.WallTime + pc.lim.grace + procSlack)
	defer kill.Stop()
	ctxDone := pc.ctx.Done()
	var (
		running    chan callDone // the Host.Call in progress
		cancelCall context.CancelFunc
	)
	// finishCall waits for a Host.Call in progress: Run never returns
	// while one runs.
	finishCall := func() {
		if running != nil {
			cancelCall()
			<-running
			running = nil
		}
	}
	defer finishCall()
	for {
		select {
		case f := <-frames:
			switch f.Op {
			case "call":
				if running != nil { // the child calls one at a time
					continue
				}
				calls++
				callCtx, cancel := context.WithCancel(pc.ctx)
				cancelCall = cancel
				running = make(chan callDone, 1)
				go func(ch chan<- callDone, seq int, name string, args json.RawMessage) {
					var d callDone
					defer func() {
						if p := recover(); p != nil { // as in process: the host's panic ends the execution
							d = callDone{err: Abort(fmt.Errorf("tool call %d (%s) failed inside the host: %v", seq, name, p))}
						}
						ch <- d
					}()
					d.res, d.err = pc.host.Call(callCtx, seq, name, args)
				}(running, f.Seq, f.Name, f.Args)
			case "cancelcall":
				if running != nil {
					cancelCall()
				}
			case "now", "random", "explain":
				pc.reply(pc.value(f))
			case "done":
				finishCall()
				out := Output{Text: f.Text, Calls: f.Calls}
				if f.Err != nil {
					out.Err = pc.remoteErr(f.Err)
				}
				return out
			}
		case d := <-running:
			running = nil
			cancelCall()
			if !json.Valid(d.res.Structured) {
				// Not JSON (or none): the code gets the text, as in
				// process; encoded, it failed the whole result.
				d.res.Structured = nil
			}
			r := frame{Op: "result", Result: &d.res}
			if d.err != nil {
				var ab *abortError
				r.Result, r.Error, r.Abort = nil, d.err.Error(), errors.As(d.err, &ab)
				if r.Abort {
					pc.abort = d.err
				}
			}
			pc.reply(r)
		case err := <-readErr:
			finishCall()
			_ = pc.stdin.Close()
			if !errors.Is(err, io.EOF) { // not the child's end: what it sent
				_ = pc.cmd.Process.Kill()
				<-pc.exited
				return Output{Calls: calls, Err: fmt.Errorf("code mode: %w", err)}
			}
			<-pc.exited
			return pc.died(pc.werr, calls)
		case <-ctxDone:
			ctxDone = nil
			pc.reply(frame{Op: "cancel", Error: context.Cause(pc.ctx).Error()})
		case <-kill.C:
			_ = pc.cmd.Process.Kill()
			finishCall()
			return Output{Calls: calls, Err: limitErr("wall time", "execution stopped: the wall time limit of %v was reached and the code was stuck inside a built-in function: its process was killed", pc.lim.WallTime)}
		}
	}
}

// value answers a child's request for a clock read, a random value or
// an explanation. A Host that panics ends the execution as it does in
// process: the child's Host panics with the same value, and its session
// turns that into an Abort.
func (pc *procCall) value(f frame) (v frame) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if f.Op == "explain" { // a failing explanation leaves the plain refusal, as in process
			v = frame{Op: "value"}
			return
		}
		what := "clock read"
		if f.Op == "random" {
			what = "random value"
		}
		v = frame{Op: "value", Abort: true, Error: fmt.Sprint(p)}
		pc.abort = Abort(fmt.Errorf("%s %d failed inside the host: %v", what, f.Seq, p))
	}()
	switch f.Op {
	case "now":
		return frame{Op: "value", Now: pc.host.Now(f.Seq)}
	case "random":
		r := pc.host.Random(f.Seq)
		if math.IsNaN(r) || r < 0 || r >= 1 {
			r = 0
		}
		return frame{Op: "value", Random: r}
	}
	var why string
	if e, ok := pc.host.(Explainer); ok {
		why = e.Explain(f.Name)
	}
	return frame{Op: "value", Text: why}
}

// reply sends f to the child; a child that is gone is noticed by the
// reader.
func (pc *procCall) reply(f frame) {
	b, err := marshalFrame(f)
	if err != nil {
		b, _ = marshalFrame(frame{Op: "result", Error: fmt.Sprintf("the tool's result could not be passed to the code: %v", err)})
	}
	_ = writeFrame(pc.stdin, b)
}

// died is the Output of a child that ended without answering.
func (pc *procCall) died(werr error, calls int) Output {
	msg := pc.stderr.firstLine()
	var ee *exec.ExitError
	killed := errors.As(werr, &ee) && ee.ProcessState != nil && ee.String() == "signal: killed"
	if outOfMemory(msg) {
		return Output{Calls: calls, Err: limitErr("memory", "execution stopped: the code's process ran out of memory (its limit is %d MiB; %s)", procMemory(pc.lim)>>20, msg)}
	}
	if killed {
		// Most often the kernel's out-of-memory killer, but an operator's
		// kill -9 too: said as it is, with the likelier cause.
		return Output{Calls: calls, Err: limitErr("memory", "execution stopped: the code's process was killed (SIGKILL), most often by the system's "+
			"out-of-memory killer: use less memory (the process's own limit is %d MiB)", procMemory(pc.lim)>>20)}
	}
	if err := pc.ctx.Err(); err != nil {
		return Output{Calls: calls, Err: fmt.Errorf("execution cancelled: %w", context.Cause(pc.ctx))}
	}
	status := "exit status 0"
	if werr != nil {
		status = werr.Error()
	}
	return Output{Calls: calls, Err: fmt.Errorf("code mode: the code's process ended without a result (%s): %s", status, firstNonEmpty(msg, "no message"))}
}

// outOfMemory reports whether a child's fatal error is the Go runtime's
// for an allocation the address-space limit refused: its words depend on
// which allocation it was ("fatal error: out of memory", "runtime: out of
// memory: cannot allocate ...", "fatal error: runtime: cannot allocate
// memory" when mapping more of the heap failed).
func outOfMemory(msg string) bool {
	for _, w := range []string{"out of memory", "cannot allocate memory", "cannot map pages"} {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}

// remoteErr is the error a child reported, rebuilt in this process.
func (pc *procCall) remoteErr(e *childErr) error {
	switch e.Kind {
	case "limit":
		return &LimitError{Limit: e.Limit, Message: e.Message}
	case "abort":
		if pc.abort != nil {
			return &remoteError{msg: e.Message, cause: pc.abort}
		}
	}
	if pc.ctx.Err() != nil {
		// Cancelled: also when the code ended by itself first (it threw
		// the refusal of a call the cancellation cut short).
		return &remoteError{msg: e.Message, cause: context.Cause(pc.ctx)}
	}
	return errors.New(e.Message)
}

// remoteError is an error of the child's wrapping one of this process.
type remoteError struct {
	msg   string
	cause error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.cause }

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// childEnv is the child's whole environment: the marker and the time
// zone (goja formats dates in it). Nothing else: the code has no use for
// the worker's secrets, and its process should not hold them.
func childEnv() []string {
	// MALLOC_ARENA_MAX: in a cgo build, glibc reserves 64 MiB of address
	// space per thread that allocates, which the limit counts.
	env := []string{ChildEnv + "=1", "GOTRACEBACK=single", "MALLOC_ARENA_MAX=2"}
	for _, k := range []string{"TZ", "GOCOVERDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// procMemory is a child's address-space budget beyond what its runtime
// mapped at start (limitAddressSpace): the heap the watchdog allows and
// its overshoot, with room for thread stacks.
func procMemory(lim Limits) int64 { return 8*lim.MaxMemory + 256<<20 }

// headBuffer keeps the first max bytes written to it.
type headBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *headBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// firstLine is the first line that says something (a fatal error's).
func (b *headBuffer) firstLine() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range strings.Split(string(b.buf), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

// Check starts one child and runs a script that calls nothing, so that a
// worker learns at start, not at a job's first execute_code, that it
// cannot start processes here (a container whose seccomp profile or
// pids limit forbids fork, no /proc, a binary on a noexec mount).
func (p Process) Check(ctx context.Context) error {
	out := p.Run(ctx, NewCatalog(nil), "return 6 * 7", checkHost{}, Limits{})
	if out.Err != nil {
		return out.Err
	}
	if out.Text != "42" {
		return fmt.Errorf("code mode: the code's process answered %q to a check that returns 42", out.Text)
	}
	return nil
}

// checkHost is Check's Host: its script makes no calls and reads no clock.
type checkHost struct{}

func (checkHost) Call(context.Context, int, string, json.RawMessage) (Result, error) {
	return Result{}, errors.New("no tools in a check")
}
func (checkHost) Now(int) int64      { return 0 }
func (checkHost) Random(int) float64 { return 0 }
