package codemode

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
)

//go:embed prelude.js
var preludeSrc string

// preludeProgram is compiled once; a goja Program may run in many runtimes
// at the same time.
var preludeProgram = goja.MustCompile("prelude.js", preludeSrc, true)

// maxJSONDepth bounds the nesting JSON.parse and JSON.stringify accept, so
// no native recursion runs deep enough to exhaust the Go stack.
const maxJSONDepth = 1000

// arrayType is the export type of a goja Array (dense or sparse), and of
// nothing else: a Proxy of an Array exports as goja.Proxy.
var arrayType = reflect.TypeOf([]any{})

// proxyType is the export type of a Proxy.
var proxyType = reflect.TypeOf(goja.Proxy{})

// maxArgs bounds the argument list of apply and Reflect.apply/construct.
const maxArgs = 1 << 17

// memEvery is how often the heap is sampled while code runs.
const memEvery = 10 * time.Millisecond

// Kinds of a host call's outcome, as the prelude's invoke expects them.
const (
	kindJSON    = 0 // payload is JSON (structured content or JSON text)
	kindText    = 1 // payload is plain text
	kindToolErr = 2 // the tool reported an error; payload is its text
	kindRefusal = 3 // the call was refused; payload is the message
)

// session is one execution: its runtime, its counters and its output.
type session struct {
	cat     *Catalog
	host    Host
	lim     Limits
	vm      *goja.Runtime
	ctx     context.Context // passed to Host.Call; cancelled when stopped
	cancel  context.CancelCauseFunc
	parent  context.Context
	helpers struct{ fmt, thrown goja.Callable }

	mu      sync.Mutex // guards reason, out and running
	reason  error      // why the execution was stopped; the first reason wins
	out     outBuf
	running string // the tool a Host.Call in progress runs, for the wall time's message

	hostMu  sync.Mutex // held while the Host runs
	closed  bool       // Run has returned: the Host is not called any more
	calls   int
	nowSeq  int
	randSeq int

	// src maps the compiled source's positions to the code's (vm goroutine only).
	src *srcMap

	// Promises rejected with no handler yet, in order (vm goroutine only).
	unhandled []*goja.Promise
}

func newSession(ctx context.Context, c *Catalog, host Host, lim Limits) *session {
	s := &session{cat: c, host: host, lim: lim, parent: ctx}
	s.ctx, s.cancel = context.WithCancelCause(ctx)
	s.out.max = lim.MaxOutput
	s.vm = goja.New()
	return s
}

// execResult is what the runtime goroutine hands back.
type execResult struct {
	value    string
	hasValue bool
	err      error
}

// run executes code and watches it: wall time, cancellation, heap growth.
func (s *session) run(code string) Output {
	defer s.cancel(context.Canceled)
	if len(code) > s.lim.MaxCode {
		return Output{Err: limitErr("code size", "the code is %d bytes, over the limit of %d bytes", len(code), s.lim.MaxCode)}
	}
	done := make(chan struct{})
	var res execResult
	go func() {
		defer close(done)
		if s.lim.exited != nil {
			defer s.lim.exited()
		}
		res = s.exec(code)
	}()

	wallC := s.lim.wall
	if wallC == nil {
		wall := time.NewTimer(s.lim.WallTime)
		defer wall.Stop()
		wallC = wall.C
	}
	tick := time.NewTicker(memEvery)
	defer tick.Stop()
	var grace *time.Timer
	var graceC <-chan time.Time
	defer func() {
		if grace != nil {
			grace.Stop()
		}
	}()
	stopped := func(err error) {
		s.stop(err)
		if grace == nil {
			grace = time.NewTimer(s.lim.grace)
			graceC = grace.C
		}
	}
	base := readHeap()
	ctxDone := s.parent.Done()
	for {
		select {
		case <-done:
			return s.finish(res)
		case <-ctxDone:
			ctxDone = nil
			stopped(fmt.Errorf("execution cancelled: %w", context.Cause(s.parent)))
		case <-wallC:
			wallC = nil // reached once (a test's wall may be a closed channel)
			// The limit counts the tools' time: a slow tool is no loop.
			s.mu.Lock()
			running := s.running
			s.mu.Unlock()
			if running != "" {
				stopped(limitErr("wall time", "execution stopped: the wall time limit of %v was reached while tool %q was running (the limit counts the time tool calls take)", s.lim.WallTime, running))
			} else {
				stopped(limitErr("wall time", "execution stopped: the wall time limit of %v was reached (a loop that does not end?)", s.lim.WallTime))
			}
		case <-tick.C:
			if grew := heapGrowth(base, s.lim.MaxMemory); grew > 0 {
				stopped(limitErr("memory", "execution stopped: memory grew by %d MiB, over the limit of %d MiB", grew>>20, s.lim.MaxMemory>>20))
			}
		case <-graceC:
			// The runtime is inside a native built-in that does not
			// check for interrupts. Return without it: wait for a Host
			// call in progress, then close the Host off.
			s.hostMu.Lock()
			s.closed = true
			calls := s.calls
			s.hostMu.Unlock()
			s.mu.Lock()
			defer s.mu.Unlock()
			err := fmt.Errorf("%w (the code was stuck inside a built-in function and was abandoned)", s.reason)
			return Output{Text: s.out.assemble("", false), Calls: calls, Err: err}
		}
	}
}

// finish builds the Output once the runtime goroutine is done.
func (s *session) finish(res execResult) Output {
	s.hostMu.Lock()
	s.closed = true
	calls := s.calls
	s.hostMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	err := res.err
	if err == nil && s.reason != nil {
		// Stopped after the code finished (e.g. a tool-call limit hit by
		// a call the code did not wait for).
		err = s.reason
	}
	if err != nil {
		return Output{Text: s.out.assemble("", false), Calls: calls, Err: err}
	}
	return Output{Text: s.out.assemble(res.value, res.hasValue), Calls: calls}
}

// stop ends the execution for err (the first reason wins).
func (s *session) stop(err error) {
	s.mu.Lock()
	first := s.reason == nil
	if first {
		s.reason = err
	}
	s.mu.Unlock()
	if first {
		s.vm.Interrupt(err)
		s.cancel(err)
	}
}

func (s *session) stopReason() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// exec runs on the runtime goroutine.
func (s *session) exec(code string) (res execResult) {
	defer func() {
		if p := recover(); p != nil {
			res = execResult{err: fmt.Errorf("internal error in code mode: %v", p)}
		}
	}()
	prg, m, err := prepare(code)
	if err != nil {
		return execResult{err: err}
	}
	s.src = m
	if err := s.setup(); err != nil {
		return execResult{err: s.scriptErr(err)}
	}
	v, err := s.vm.RunProgram(prg)
	if err != nil {
		return execResult{err: s.scriptErr(err)}
	}
	p, ok := v.Export().(*goja.Promise)
	if !ok {
		return execResult{err: errors.New("internal error in code mode: the code did not run as a function")}
	}
	s.reportUnhandled(p)
	switch p.State() {
	case goja.PromiseStateRejected:
		return execResult{err: s.uncaught(p.Result())}
	case goja.PromiseStatePending:
		return execResult{err: errors.New("the code did not finish: it awaits a promise that never settles (code mode has no timers or events)")}
	}
	result := p.Result()
	if result == nil || goja.IsUndefined(result) {
		return execResult{}
	}
	text, err := s.helpers.fmt(goja.Undefined(), result)
	if err != nil {
		return execResult{err: s.scriptErr(err)}
	}
	return execResult{value: text.String(), hasValue: true}
}

// setup prepares the fresh runtime: limits, clock and random source, the
// prelude with console and tools.
func (s *session) setup() error {
	vm := s.vm
	vm.SetMaxCallStackSize(s.lim.MaxStackDepth)
	vm.SetParserOptions(parser.WithDisableSourceMaps)
	vm.SetTimeSource(func() time.Time { return time.UnixMilli(s.now()) })
	vm.SetRandSource(s.random)
	vm.SetPromiseRejectionTracker(func(p *goja.Promise, op goja.PromiseRejectionOperation) {
		if op == goja.PromiseRejectionReject {
			s.unhandled = append(s.unhandled, p)
			return
		}
		for i, q := range s.unhandled {
			if q == p {
				s.unhandled = append(s.unhandled[:i], s.unhandled[i+1:]...)
				break
			}
		}
	})

	fnv, err := vm.RunProgram(preludeProgram)
	if err != nil {
		return err
	}
	fn, ok := goja.AssertFunction(fnv)
	if !ok {
		return errors.New("internal error in code mode: bad prelude")
	}
	mem := s.lim.MaxMemory
	if s.lim.guardMemory > 0 {
		mem = s.lim.guardMemory
	}
	h := vm.NewObject()
	names := make([]any, len(s.cat.tools))
	idents := make([]any, len(s.cat.tools))
	for i, t := range s.cat.tools {
		names[i], idents[i] = t.Name, s.cat.ident[i]
	}
	for k, v := range map[string]any{
		"maxStr":    clampInt(mem/2, 1<<30),
		"maxElems":  clampInt(mem/64, 1<<30),
		"maxKeys":   clampInt(mem/256, 1<<30),
		"maxDepth":  maxJSONDepth,
		"maxArgs":   maxArgs,
		"maxOutput": s.lim.MaxOutput,
		"guardName": guardName,
		"names":     vm.NewArray(names...),
		"idents":    vm.NewArray(idents...),
		"jsonDepth": func(c goja.FunctionCall) goja.Value {
			return vm.ToValue(jsonDepth(c.Argument(0).String(), maxJSONDepth))
		},
		"target": func(c goja.FunctionCall) goja.Value {
			v := c.Argument(0)
			for {
				o, ok := v.(*goja.Object)
				if !ok || o.ExportType() != proxyType {
					return v
				}
				t := o.Export().(goja.Proxy).Target()
				if t == nil { // revoked
					return v
				}
				v = t
			}
		},
		"plainArray": func(c goja.FunctionCall) goja.Value {
			o, ok := c.Argument(0).(*goja.Object)
			return vm.ToValue(ok && o.ExportType() == arrayType)
		},
		"scan": func(c goja.FunctionCall) goja.Value {
			return vm.ToValue(scanString(c.Argument(0), c.Argument(1).ToBoolean()))
		},
		"overflow": func(c goja.FunctionCall) goja.Value {
			t := c.Argument(0).String()
			text, mark, ok := overflowMarks(t)
			if !ok || !json.Valid([]byte(text)) {
				return goja.Null()
			}
			return vm.NewArray(text, mark)
		},
		"jsonSize": func(c goja.FunctionCall) goja.Value {
			containers, values := jsonSize(c.Argument(0).String())
			return vm.NewArray(containers, values)
		},
		"full": func(goja.FunctionCall) goja.Value {
			s.mu.Lock()
			defer s.mu.Unlock()
			return vm.ToValue(s.out.full)
		},
		"emit": func(c goja.FunctionCall) goja.Value {
			level := int(c.Argument(0).ToInteger())
			text := c.Argument(1).String()
			s.mu.Lock()
			s.out.add(level, text)
			s.mu.Unlock()
			return goja.Undefined()
		},
		"explain": func(c goja.FunctionCall) goja.Value {
			return vm.ToValue(s.explain(c.Argument(0).String()))
		},
		"call": func(c goja.FunctionCall) goja.Value {
			kind, payload := s.call(c.Argument(0).String(), c.Argument(1).String())
			return vm.NewArray(kind, payload)
		},
	} {
		if err := h.Set(k, v); err != nil {
			return err
		}
	}
	hv, err := fn(goja.Undefined(), h)
	if err != nil {
		return err
	}
	ho := hv.ToObject(vm)
	fmtFn, ok1 := goja.AssertFunction(ho.Get("fmt"))
	thrown, ok2 := goja.AssertFunction(ho.Get("thrown"))
	if !ok1 || !ok2 {
		return errors.New("internal error in code mode: bad prelude helpers")
	}
	s.helpers.fmt, s.helpers.thrown = fmtFn, thrown
	if s.lim.hook != nil {
		s.lim.hook(vm)
	}
	return nil
}

func clampInt(v int64, max int64) int64 {
	if v > max {
		return max
	}
	if v < 1024 {
		return 1024
	}
	return v
}

// call runs one tool call for the code, on the runtime goroutine.
func (s *session) call(name, args string) (kind int, payload string) {
	s.hostMu.Lock()
	defer s.hostMu.Unlock()
	if s.closed || s.ctx.Err() != nil {
		return kindRefusal, "execution stopped"
	}
	if s.calls >= s.lim.MaxCalls {
		err := limitErr("tool calls", "execution stopped: the limit of %d tool calls per execution was reached", s.lim.MaxCalls)
		s.stop(err)
		return kindRefusal, err.Message
	}
	if s.host == nil {
		return kindRefusal, "no tools can be called here"
	}
	seq := s.calls
	s.calls++
	s.mu.Lock()
	s.running = name
	s.mu.Unlock()
	res, err := s.hostCall(seq, name, json.RawMessage(args))
	s.mu.Lock()
	s.running = ""
	s.mu.Unlock()
	if err != nil {
		var abort *abortError
		if errors.As(err, &abort) {
			s.stop(abort.err)
		}
		return kindRefusal, err.Error()
	}
	if res.IsError {
		text := res.Text
		if text == "" {
			text = "tool " + strconv.Quote(name) + " failed"
		}
		return kindToolErr, text
	}
	if st := trimSpace(res.Structured); len(st) > 0 && string(st) != "null" && json.Valid(st) {
		return kindJSON, exactNumbers(string(st))
	}
	if json.Valid([]byte(res.Text)) {
		return kindJSON, exactNumbers(res.Text)
	}
	return kindText, res.Text
}

// maxExplained bounds an Explainer's answer, which the code's error quotes.
const maxExplained = 4096

// explain is the Host's reason why name is not a tool of the execution,
// or "" (no Explainer, no reason, or the execution stopped).
func (s *session) explain(name string) (why string) {
	s.hostMu.Lock()
	defer s.hostMu.Unlock()
	ex, ok := s.host.(Explainer)
	if !ok || s.closed || s.ctx.Err() != nil {
		return ""
	}
	defer func() {
		if p := recover(); p != nil {
			why = "" // a failing explanation leaves the plain refusal
		}
	}()
	why = ex.Explain(name)
	if len(why) > maxExplained {
		cut := maxExplained
		for cut > 0 && !utf8.RuneStart(why[cut]) {
			cut--
		}
		why = why[:cut] + "..."
	}
	return why
}

// hostCall is Host.Call with a panic turned into an Abort.
func (s *session) hostCall(seq int, name string, args json.RawMessage) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = Abort(fmt.Errorf("tool call %d (%s) failed inside the host: %v", seq, name, p))
		}
	}()
	return s.host.Call(s.ctx, seq, name, args)
}

// now is the runtime's clock: Host.Now, in order.
func (s *session) now() (ms int64) {
	s.hostMu.Lock()
	defer s.hostMu.Unlock()
	if s.closed {
		return 0
	}
	if s.host == nil {
		return time.Now().UnixMilli()
	}
	if s.valuesOver() {
		return 0
	}
	seq := s.nowSeq
	s.nowSeq++
	defer func() {
		if p := recover(); p != nil {
			ms = 0
			s.stop(Abort(fmt.Errorf("clock read %d failed inside the host: %v", seq, p)))
		}
	}()
	return s.host.Now(seq)
}

// valuesOver stops the execution when it read Limits.MaxValues clock
// and random values already (hostMu held).
func (s *session) valuesOver() bool {
	if s.nowSeq+s.randSeq < s.lim.MaxValues {
		return false
	}
	s.stop(limitErr("clock and random values", "execution stopped: the limit of %d clock reads and random values per execution "+
		"was reached (code mode has no timers: a loop on Date.now() does not wait)", s.lim.MaxValues))
	return true
}

// random is the runtime's Math.random: Host.Random, in order.
func (s *session) random() (v float64) {
	s.hostMu.Lock()
	defer s.hostMu.Unlock()
	if s.closed || s.host == nil {
		return 0
	}
	if s.valuesOver() {
		return 0
	}
	seq := s.randSeq
	s.randSeq++
	defer func() {
		if p := recover(); p != nil {
			v = 0
			s.stop(Abort(fmt.Errorf("random value %d failed inside the host: %v", seq, p)))
		}
	}()
	v = s.host.Random(seq)
	if !(v >= 0 && v < 1) || math.IsNaN(v) {
		v = 0
	}
	return v
}

// scriptErr turns an error out of goja into the execution's error.
func (s *session) scriptErr(err error) error {
	// A type switch, not errors.As: goja returns these types unwrapped,
	// and (*goja.Exception).Unwrap runs JavaScript (an instanceof on the
	// thrown value, a "value" getter), so errors.As on a thrown Proxy
	// whose getPrototypeOf trap throws panicked here.
	switch e := err.(type) { //nolint:errorlint // see above: errors.As would run the thrown value's traps
	case *goja.InterruptedError:
		if r := s.stopReason(); r != nil {
			return r
		}
		if e, ok := e.Value().(error); ok {
			return e
		}
		return errors.New("execution stopped")
	case *goja.StackOverflowError:
		return limitErr("call stack", "execution stopped: the call stack exceeded %d frames (a recursion that does not end?)", s.lim.MaxStackDepth)
	case *goja.Exception:
		if r := s.stopReason(); r != nil {
			return r
		}
		return s.uncaught(e.Value())
	}
	if r := s.stopReason(); r != nil {
		return r
	}
	return err
}

// uncaught describes a value the code threw and did not catch.
func (s *session) uncaught(v goja.Value) error {
	if r := s.stopReason(); r != nil {
		return r
	}
	if s.helpers.thrown == nil {
		return errors.New("Uncaught " + v.String())
	}
	d, err := s.helpers.thrown(goja.Undefined(), v)
	if _, ok := err.(*goja.Exception); ok { //nolint:errorlint // unwrapped from goja; errors.As would run JavaScript
		// Describing the value threw again (thrown catches what it can;
		// this is a last resort). Not s.scriptErr: it would describe the
		// new value, which may throw another, without end.
		return errors.New("Uncaught exception (its value could not be printed)") //nolint:staticcheck // JavaScript's own wording, as every other uncaught error
	}
	if err != nil {
		return s.scriptErr(err)
	}
	o := d.ToObject(s.vm)
	text := o.Get("0").String()
	stack := o.Get("1").String()
	return errors.New("Uncaught " + s.cutMessage(text) + s.location(stack))
}

// cutMessage bounds a thrown value's text by MaxOutput, as Output.Text is:
// a thrown string of megabytes was the execution's error whole.
func (s *session) cutMessage(text string) string {
	limit := s.lim.MaxOutput
	if len(text) <= limit {
		return text
	}
	mark := fmt.Sprintf("... [thrown value truncated: %d bytes]", len(text))
	cut := max(limit-len(mark), 0)
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + mark
}

// reportUnhandled prints the rejections nothing handled, other than the
// code's own result.
func (s *session) reportUnhandled(main *goja.Promise) {
	for _, p := range s.unhandled {
		if p == main || p.State() != goja.PromiseStateRejected {
			continue
		}
		d, err := s.helpers.thrown(goja.Undefined(), p.Result())
		if err != nil {
			continue
		}
		o := d.ToObject(s.vm)
		s.mu.Lock()
		s.out.add(2, "unhandled rejection: "+s.cutMessage(o.Get("0").String())+s.location(o.Get("1").String()))
		s.mu.Unlock()
	}
	s.unhandled = nil
}

var codeLoc = regexp.MustCompile(`code\.js:(\d+):(\d+)`)

// location is " (at line L:C)" for the first frame of the code in a stack.
func (s *session) location(stack string) string {
	m := codeLoc.FindStringSubmatch(stack)
	if m == nil {
		return ""
	}
	line, _ := strconv.Atoi(m[1])
	col, _ := strconv.Atoi(m[2])
	line, col = s.src.userPos(line, col)
	return fmt.Sprintf(" (at line %d:%d)", line, col)
}

// userPos maps a position in the wrapped source to the code's own.
func userPos(line, col int) (int, int) {
	if line == 1 {
		col -= len(prefix)
		if col < 1 {
			col = 1
		}
	}
	return line, col
}

func trimSpace(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	for j > i && (b[j-1] == ' ' || b[j-1] == '\t' || b[j-1] == '\n' || b[j-1] == '\r') {
		j--
	}
	return b[i:j]
}

// jsonDepth is the deepest nesting of arrays and objects in a JSON text,
// counting no further than limit+1.
func jsonDepth(s string, limit int) int {
	depth, max := 0, 0
	structural(s, func(c byte) bool {
		switch c {
		case '[', '{':
			depth++
			if depth > max {
				max = depth
			}
		case ']', '}':
			depth--
		}
		return max <= limit
	})
	return max
}

// jsonSize counts the arrays and objects of a JSON text and (about) its
// values: one more than its commas outside strings. JSON.parse builds
// them in one native step, so the prelude refuses a text that would build
// more than the guards allow.
func jsonSize(s string) (containers, values int) {
	values = 1
	structural(s, func(c byte) bool {
		switch c {
		case '[', '{':
			containers++
		case ',':
			values++
		}
		return true
	})
	return containers, values
}

// structural calls visit with each byte of a JSON text outside its
// strings, until visit returns false.
func structural(s string, visit func(c byte) bool) {
	inStr := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		if c == '"' {
			inStr = true
			continue
		}
		if !visit(c) {
			return
		}
	}
}

// scanString reports whether the string v has a character that is not
// ASCII, or with escapes one that JSON.stringify writes as an escape
// (a control character, '"', '\\', a surrogate). A RegExp took over 3 s
// for 100 million characters; this reads them in place.
func scanString(v goja.Value, escapes bool) bool {
	s, ok := v.(goja.String)
	if !ok {
		return true
	}
	for i, n := 0, s.Length(); i < n; i++ {
		c := s.CharAt(i)
		if escapes {
			if c < 0x20 || c == '"' || c == '\\' || c >= 0xd800 && c <= 0xdfff {
				return true
			}
		} else if c >= 0x80 {
			return true
		}
	}
	return false
}
