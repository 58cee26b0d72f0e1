package agentloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jetagent/jetagent/internal/codemode"
	"github.com/jetagent/jetagent/internal/journal"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/reflect"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// ToolExecuteCode is code mode's tool: it runs JavaScript against typed
// tool wrappers (internal/codemode).
const ToolExecuteCode = "execute_code"

// codeIndexBytes bounds the tool index in execute_code's description:
// about 1,500 tokens, whatever the catalog's size (search_tools finds the
// rest).
const codeIndexBytes = 6 << 10

const executeCodeIntro = "Run JavaScript: the body of an async function (top-level await; return a value to get it back). " +
	"Each tool is an async function on `tools`: `const r = await tools.NAME({...args})` returns the tool's structured content, " +
	"else its text parsed as JSON, else the text; a tool error throws an Error with the tool's message (catch it if you can recover). " +
	"Calls run one at a time, in the order they are made (Promise.all too). Only what you console.log and the returned value come back to you, cut when long: " +
	"filter and summarise in code rather than printing raw data. No require, import, fetch, process or timers. " +
	"get_tool_details gives a tool's TypeScript signature; search_tools finds tools not listed here.\n\nTools:\n"

// executeCodeParams is execute_code's input schema.
var executeCodeParams = json.RawMessage(`{"type":"object","properties":{"code":{"type":"string","description":"JavaScript, the body of an async function"}},"required":["code"],"additionalProperties":false}`)

// codeModeTools is code mode's tools array for a catalog: execute_code
// (with the catalog's index), search_tools and get_tool_details. It is
// the same bytes in every request of a job.
func codeModeTools(cc *codemode.Catalog) []llm.Tool {
	meta := metaTools()
	return []llm.Tool{
		{Name: ToolExecuteCode, Description: executeCodeIntro + cc.Index(codeIndexBytes), Parameters: executeCodeParams},
		meta[0], // search_tools
		meta[1], // get_tool_details
	}
}

// codeCatalog is the codemode catalog of tools: every tool of the job's
// catalog is a function on `tools` under its model-facing name.
func codeCatalog(tools []toolcache.Tool) *codemode.Catalog {
	ct := make([]codemode.Tool, len(tools))
	for i, t := range tools {
		ct[i] = codemode.Tool{Name: t.Name, Description: t.Description, InputSchema: parameters(t), OutputSchema: t.OutputSchema}
	}
	return codemode.NewCatalog(ct)
}

// codeEntries are code mode's direct tools, shared by every job.
var codeEntries = sync.OnceValue(func() map[string]*entry {
	m := map[string]*entry{}
	for name, e := range metaEntries() {
		if name != ToolCallTool {
			m[name] = e
		}
	}
	m[ToolExecuteCode] = &entry{
		tool: toolcache.Tool{Name: ToolExecuteCode, Original: ToolExecuteCode, Description: "Run JavaScript against the tools.", InputSchema: executeCodeParams, Parameters: executeCodeParams},
		kind: kindExecuteCode,
	}
	return m
})

// runCode runs one execute_code call: its inner calls go through the
// same checks, journal and events as direct calls, and are recorded for
// reflection in the order they were made.
func (j *job) runCode(ctx context.Context, round int, c *call, args json.RawMessage) (string, bool) {
	var a struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(args, &a)
	done, quiet := j.codeOutcome(c)
	h := &codeHost{j: j, round: round, parent: c, quiet: quiet}
	lim := j.l.cfg.CodeLimits
	lim.MaxOutput = codeOutputLimit(lim.MaxOutput, j.l.cfg.MaxToolOutput)
	var out codemode.Output
	if r := j.l.cfg.CodeRunner; r != nil {
		out = r.Run(ctx, j.reg.code, a.Code, h, lim)
	} else {
		out = j.reg.code.Run(ctx, a.Code, h, lim)
	}
	h.mu.Lock()
	c.records, c.cutInner = h.records, h.cut
	h.mu.Unlock()
	f := h.fatalErr()
	if f != nil {
		c.fatal = f
	}
	if quiet && done.Text != nil {
		// What the model read then: this run stopped where that one did
		// (codeHost.Call), but not necessarily with the same words.
		return *done.Text, done.IsError
	}
	text, isErr := out.Text, false
	if out.Err != nil {
		text, isErr = codeErrorText(out.Err.Error(), out.Text, j.l.cfg.MaxToolOutput), true
	}
	// Not when the job was stopped (a timeout, a cancel, the worker
	// shutting down): the next attempt's run is the one to publish.
	if f == nil && !quiet && ctx.Err() == nil {
		j.codeDone(ctx, c, codeDone{Text: &text, IsError: isErr})
	}
	return text, isErr
}

// codeDoneKey is the journal's key for "the execute_code call at key
// completed": a value, since the script itself is not journaled (a
// resumed attempt runs it again, its inner calls replayed from the
// journal, to rebuild its records).
func codeDoneKey(key string) string { return key + ".end" }

// codeDone is the value at codeDoneKey: the call's result as the model
// read it. An execution can end before its code does (its process
// killed, a wall time or memory limit), and its replay, whose calls come
// back at once from the journal, would not; it must give the model's
// result, not its own. Text is nil in a marker of an older worker
// (`true`).
type codeDone struct {
	Text    *string `json:"text,omitempty"`
	IsError bool    `json:"is_error,omitempty"`
}

// codeCompleted reports whether an earlier attempt completed the
// execute_code call c: it published the call's events then, so a replay
// publishes none (run1 and codeHost ask).
func (j *job) codeCompleted(c *call) bool {
	_, ok := j.codeOutcome(c)
	return ok
}

// codeOutcome is codeCompleted with the result an earlier attempt gave.
func (j *job) codeOutcome(c *call) (codeDone, bool) {
	if j.in.Journal == nil || c.key == "" || c.entry == nil || c.entry.kind != kindExecuteCode {
		return codeDone{}, false
	}
	v, ok := j.in.Journal.Value(codeDoneKey(c.key))
	if !ok {
		return codeDone{}, false
	}
	var d codeDone
	_ = json.Unmarshal(v, &d) // `true`: completed, result unknown
	return d, true
}

// codeDone records that the execute_code call c completed with d, before
// run1 publishes its result (as a tool call's completion is stored before
// its result is published). A marker that cannot be stored only means a
// replay publishes the call's events again: a store that panics storing
// it is one that failed (logged). Before, the panic reached dispatchSafe
// and the completed script's result became "failed inside the worker",
// which the model could take for a reason to run it again.
func (j *job) codeDone(ctx context.Context, c *call, d codeDone) {
	if j.in.Journal == nil || c.key == "" {
		return
	}
	defer func() {
		if p := recover(); p != nil {
			j.logPanic("journal", ToolExecuteCode, p, "call_id", c.tc.ID, "key", codeDoneKey(c.key))
		}
	}()
	v, err := json.Marshal(d)
	if err != nil {
		v = json.RawMessage("true")
	}
	_ = j.in.Journal.RecordValue(context.WithoutCancel(ctx), codeDoneKey(c.key), v, nil)
}

// codeOutputLimit is the Limits.MaxOutput an execution runs with: the
// configured one (0: codemode's default), but no more than the tool
// output limit less room for an error message. codemode cuts its output
// with markers saying what was left out and keeps a share for the final
// value; cut again at MaxToolOutput (the defaults are 20,000 and 16 KiB),
// the markers and the value at the end were lost.
func codeOutputLimit(configured, maxToolOutput int) int {
	if configured <= 0 {
		configured = codemode.DefaultLimits.MaxOutput
	}
	return min(configured, maxToolOutput-codeErrorRoom(maxToolOutput))
}

// codeErrorRoom is the part of the tool output limit kept for the error
// message of an execution that failed after printing.
func codeErrorRoom(maxToolOutput int) int { return min(1024, maxToolOutput/4) }

const outputBeforeError = "\n\nOutput before the error:\n"

// codeErrorText is execute_code's result for a failed execution: the
// error, then what the code printed before it. An error message too long
// to leave the output its place (a thrown string of megabytes) is cut, so
// that the output, cut by codemode with its markers, comes back whole.
func codeErrorText(errText, output string, maxToolOutput int) string {
	msg := "Error: " + errText
	if output == "" {
		return msg
	}
	if room := maxToolOutput - len(outputBeforeError) - len(output); len(msg) > room {
		mark := fmt.Sprintf(" [error message truncated: %d bytes]", len(msg))
		if keep := room - len(mark); keep > len("Error: ") {
			msg = msg[:runeCut(msg, keep)] + mark
		}
	}
	return msg + outputBeforeError + output
}

// runeCut is the largest n <= max such that s[:n] ends on a rune boundary.
func runeCut(s string, max int) int {
	if max >= len(s) {
		return len(s)
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return max
}

// codeHost is what an execution's code reaches: the job's tools.
type codeHost struct {
	j      *job
	round  int
	parent *call
	// quiet: an earlier attempt completed the execute_code call and
	// published its inner calls' events; this run publishes none.
	quiet bool

	mu      sync.Mutex
	records []reflect.Record
	cut     []int // of records, calls that ended with their context
	fatal   error
}

func (h *codeHost) fatalErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fatal
}

// Call runs inner call seq: the tool must be the job's (its allow/deny
// made the catalog), its arguments valid, and it goes through the journal
// under the parent's key, so a re-run script gets the recorded results.
func (h *codeHost) Call(ctx context.Context, seq int, name string, args json.RawMessage) (codemode.Result, error) {
	j, parent := h.j, h.parent
	e, ok := j.reg.byName[name]
	if !ok {
		return codemode.Result{}, j.reg.unknownToolError(name, false)
	}
	args = compactJSON(args)
	id := innerCallID(parent.tc.ID, seq, j.callIDs)
	ic := &call{
		tc:    llm.ToolCall{ID: id, Type: "function", Function: llm.FunctionCall{Name: name, Arguments: string(args)}},
		entry: e, target: e, args: args, targetArgs: args,
		key: parent.key + "." + strconv.Itoa(seq),
	}
	if parent.key == "" {
		ic.key = ""
	}
	emit := j.emit
	if h.quiet {
		emit = func(context.Context, string, int, map[string]any) {} // published by the attempt that ran it
	}
	if ic.invalid = j.validateCall(e, args); len(ic.invalid) > 0 {
		emit(ctx, EventToolValidationFailed, h.round, map[string]any{
			"retry": 0, "call_id": id, "name": name, "tool": name, "arguments": string(args),
			"errors": ic.invalid, "from": ToolExecuteCode, "parent_call_id": parent.tc.ID,
		})
		return codemode.Result{}, errors.New(strings.TrimPrefix(invalidMessage(ic), "Error: "))
	}
	if _, ok := j.journaled(ic); ok && h.quiet && !j.in.Journal.Made(ic.key) {
		// The completed execution never made this call: it ended before
		// (its process killed, a limit). Made now, in a round the model
		// saw end, it would be an effect nobody asked for.
		return codemode.Result{}, codemode.Abort(fmt.Errorf("the execution of %s stopped before its call %d (%s) the first time: not made on replay", parent.tc.ID, seq, name))
	}
	if _, ok := j.journaled(ic); ok && j.in.Journal.Completed(ic.key) {
		emit = func(context.Context, string, int, map[string]any) {} // published by the attempt that ran it
	}
	emit(ctx, EventToolCall, h.round, map[string]any{
		"call_id": id, "name": name, "arguments": string(args),
		"from": ToolExecuteCode, "parent_call_id": parent.tc.ID,
	})
	start := time.Now()
	pctx := withProgress(ctx, h.round, emit, id, name, name, map[string]any{"from": ToolExecuteCode, "parent_call_id": parent.tc.ID})
	res, err := j.effect(pctx, ic, j.runEffect(e, args))
	if ic.fatal != nil {
		// A journal that cannot be written ends the attempt; a script that
		// went another way than the record ends only this execution, with
		// the reason for the model.
		if !errors.Is(ic.fatal, journal.ErrDiverged) {
			h.mu.Lock()
			h.fatal = ic.fatal
			h.mu.Unlock()
		}
		return codemode.Result{}, codemode.Abort(ic.fatal)
	}
	if err != nil {
		res = journal.Result{Text: "Error: " + err.Error(), IsError: true}
	}
	text := resultText(toolcache.Result{Text: res.Text, Structured: res.Structured, IsError: res.IsError})
	// Recorded before its events are published: a Sink that panics then
	// ends the execution (codemode's Abort), and the call, which ran and
	// is journaled, must still be in the reflected transcript.
	out := truncate(text, j.l.cfg.MaxToolOutput)
	if strings.TrimSpace(out) == "" {
		out = noOutput // the record is history for a continuation: as run1 does
	}
	cut := err != nil && ctx.Err() != nil
	if cut {
		// The execution ended while the call ran (its wall time, memory
		// or call limit; the job's end is cutRecords' note): as history,
		// "context deadline exceeded" reads as a call that failed, to be
		// made again, though it may have taken effect.
		out = "Error: the code's execution ended while this call ran: it did not finish, and may or may not have taken effect (check before calling it again)"
	}
	h.mu.Lock()
	h.records = append(h.records, reflect.Record{
		ID: id, CallID: parent.tc.ID, Kind: reflect.KindCode, Name: name,
		Input: args, Output: &out, IsError: res.IsError || cut,
	})
	if cut {
		h.cut = append(h.cut, len(h.records)-1)
	}
	h.mu.Unlock()
	if ic.status == journal.Interrupted {
		emit(ctx, EventToolInterrupted, h.round, map[string]any{
			"call_id": id, "name": name, "tool": name, "idempotency_key": j.idempotencyKey(ic),
			"from": ToolExecuteCode, "parent_call_id": parent.tc.ID,
		})
	}
	data := map[string]any{
		"call_id": id, "name": name, "tool": name,
		"duration_ms": time.Since(start).Milliseconds(), "size": len(text), "error": res.IsError,
		"truncated_for_model": false, "output": text,
		"from": ToolExecuteCode, "parent_call_id": parent.tc.ID,
	}
	if ic.status != journal.Ran {
		data["journal"] = ic.status.String()
	}
	emit(ctx, EventToolResult, h.round, data)
	if res.IsError {
		return codemode.Result{Text: strings.TrimPrefix(text, "Error: "), IsError: true}, nil
	}
	return codemode.Result{Text: res.Text, Structured: res.Structured}, nil
}

var _ codemode.Explainer = (*codeHost)(nil)

// Explain is why the code's tools has no tool name: for one of code
// mode's own tools (search_tools, which the generic refusal tells the
// model to use), that it is called directly; and when unknownToolError has
// more to say than closest names (the tool's server is down, or added it
// mid-job), what a direct call would say.
func (h *codeHost) Explain(name string) string {
	if _, ok := h.j.reg.meta[name]; ok {
		return fmt.Sprintf("%s is a tool of your tools list, not of the code: call it directly, outside execute_code", name)
	}
	if !h.j.reg.explainsMissing(name) {
		return ""
	}
	return h.j.reg.unknownToolError(name, false).Error()
}

// innerCallID is the id of inner call seq of the execute_code call parent
// (in its events, its idempotency key and the reflected transcript): "c"
// and 8 base-36 digits, since a reflected transcript is history for a
// continuation and Mistral's API takes only ids of 9 letters or digits.
// It depends only on parent, seq and the ids of the job's messages before
// this round (used, not written while a round's calls run), so every
// attempt gives the call the same id.
func innerCallID(parent string, seq int, used map[string]bool) string {
	const space = 2821109907456 // 36^8
	for salt := 0; ; salt++ {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s\x00%d\x00%d", parent, seq, salt)
		d := strconv.FormatUint(h.Sum64()%space, 36)
		id := "c" + strings.Repeat("0", 8-len(d)) + d
		if !used[id] && id != parent {
			return id
		}
	}
}

// Now is Date.now() of the script: recorded, so a re-run script sees the
// same clock.
func (h *codeHost) Now(seq int) int64 {
	v := h.value("n", seq, func() json.RawMessage {
		return json.RawMessage(strconv.FormatInt(time.Now().UnixMilli(), 10))
	})
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return time.Now().UnixMilli()
	}
	return n
}

// Random is Math.random() of the script, recorded like Now.
func (h *codeHost) Random(seq int) float64 {
	v := h.value("r", seq, func() json.RawMessage {
		return json.RawMessage(strconv.FormatFloat(rand.Float64(), 'g', -1, 64))
	})
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return rand.Float64()
	}
	return f
}

// value journals one value of the script. Without a journal, or when it
// cannot be stored (then the next call cannot be journaled either and
// ends the execution), the fresh value is used.
func (h *codeHost) value(kind string, seq int, make func() json.RawMessage) json.RawMessage {
	jr := h.j.in.Journal
	if jr == nil || h.parent.key == "" {
		return make()
	}
	v, err := jr.Once(context.WithoutCancel(context.Background()), fmt.Sprintf("%s.%s%d", h.parent.key, kind, seq), make)
	if err != nil {
		return make()
	}
	return v
}

// checkedCaller is a ToolSet that masks secrets in its answers
// (toolcache.View) and can run the outputSchema check on the answer as
// the server sent it, before masking: checked after CallTool, a
// conforming answer whose secret was masked (a token a pattern or a
// minLength describes, now "xxxxx") was taken for a violation.
type checkedCaller interface {
	CallToolChecked(ctx context.Context, name string, args json.RawMessage, check func(toolcache.Result) toolcache.Result) (toolcache.Result, error)
}

// runEffect is the call of a tool with an effect (or a resource read),
// as the journal runs it.
func (j *job) runEffect(e *entry, args json.RawMessage) func(context.Context) (journal.Result, error) {
	return func(ctx context.Context) (_ journal.Result, err error) {
		defer j.recoverRun(ctx, e.tool.Name, &err) // a panic is the call's error (panics.go)
		switch e.kind {
		case kindMCP:
			check := func(r toolcache.Result) toolcache.Result {
				if r.IsError {
					return r
				}
				return e.checkOutput(r)
			}
			var r toolcache.Result
			var err error
			if cc, ok := j.in.Tools.(checkedCaller); ok {
				r, err = cc.CallToolChecked(ctx, e.tool.Name, args, check)
			} else if r, err = j.in.Tools.CallTool(ctx, e.tool.Name, args); err == nil {
				r = check(r)
			}
			return journal.Result{Text: r.Text, Structured: r.Structured, IsError: r.IsError}, err
		case kindClient:
			out, err := j.in.ClientCaller(ctx, e.tool.Name, args)
			return journal.Result{Text: out}, err
		case kindListResources, kindReadResource:
			out, isErr, err := runResource(ctx, j.in.Tools, e.kind, args)
			return journal.Result{Text: out, IsError: isErr}, err
		}
		return journal.Result{}, fmt.Errorf("tool %q cannot be called from code", e.tool.Name)
	}
}
