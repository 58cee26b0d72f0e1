package agentloop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jetagent/jetagent/internal/journal"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/reflect"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// call is one tool call of a round, from preparation to its result.
type call struct {
	tc llm.ToolCall
	// entry is the tool called directly; target is the tool that really
	// runs (differs for call_tool). Both nil when the name is unknown.
	entry, target *entry
	args          json.RawMessage // entry's arguments, compact
	targetArgs    json.RawMessage // target's arguments
	// fault is an error answered without running anything (unknown tool,
	// arguments that are not a JSON object).
	fault string
	// invalid lists schema violations of target's arguments.
	invalid []string

	output   string // full output
	isError  bool
	forModel string // output as the model sees it (maybe truncated)
	record   *reflect.Record

	// key is the call's place in the journal ("c<round>.<index>");
	// status says how the journal answered; fatal is a journal failure
	// that ends the attempt (the call did not run).
	key    string
	status journal.Status
	fatal  error

	round   int              // the round the call is in
	records []reflect.Record // execute_code: its inner calls, in order
	// cutInner are the indexes in records of inner calls that ended with
	// their context (cutRecords says so of them).
	cutInner []int
	// ran: run1 finished the call before the job's context ended (a
	// call of a round cut by a cancellation or timeout may not have).
	ran bool
}

// prepare resolves and validates one call. It runs nothing.
func (j *job) prepare(tc llm.ToolCall) *call {
	c := &call{tc: tc}
	if strings.TrimSpace(tc.Function.Name) == "" {
		c.fault = j.reg.namelessCallError().Error()
		return c
	}
	e, ok := j.reg.lookup(tc.Function.Name)
	if !ok {
		c.fault = j.reg.unknownToolError(tc.Function.Name, true).Error()
		return c
	}
	c.entry, c.target = e, e
	args, err := objectArgs(tc.Function.Arguments)
	if err != nil {
		c.fault = err.Error()
		return c
	}
	if e.kind == kindCallTool {
		args = j.reg.callToolArguments(unwrapStringArguments(args))
	}
	c.args, c.targetArgs = args, args
	if c.invalid = j.validateCall(e, args); len(c.invalid) > 0 || e.kind != kindCallTool {
		return c
	}

	// call_tool: the real call is validated like a direct one.
	var ct struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(args, &ct)
	if name, ok := j.reg.resolveCatalogName(ct.Name); ok {
		ct.Name = name
	}
	inner, ok := j.reg.byName[ct.Name]
	if !ok {
		c.fault = j.reg.unknownToolError(ct.Name, false).Error()
		return c
	}
	c.target, c.targetArgs = inner, compactJSON(ct.Arguments)
	c.invalid = j.validateCall(inner, c.targetArgs)
	return c
}

// validateCall is e.validate, logging once per tool of a catalog (its
// entries are shared by the jobs of the catalog) when its input schema
// does not compile: its calls then go to the server unchecked, and
// nothing said so (a pattern that is not RE2, a remote $ref).
func (j *job) validateCall(e *entry, args json.RawMessage) []string {
	invalid := e.validate(args)
	if _, err := e.validator(); err != nil {
		e.warned.Do(func() {
			j.l.logger().Warn("a tool's input schema does not compile; its calls go to its server unchecked",
				"tool", e.tool.Name, "server", e.tool.Server, "err", j.maskSecrets(cutText(strings.Join(strings.Fields(err.Error()), " "), 1024)))
		})
	}
	return invalid
}

// objectArgs checks that text is one JSON object. Blank text and "null"
// mean no arguments ({}), which several servers send for parameterless
// calls; a fenced or twice-encoded object is unwrapped (repairArguments);
// anything else that is not an object is an error, never silently {}.
func objectArgs(text string) (json.RawMessage, error) {
	text, _ = repairArguments(text)
	text = strings.TrimSpace(text)
	if text == "" {
		return json.RawMessage(`{}`), nil
	}
	var v any
	// The text is quoted: history carries {} in its place (historyMessage).
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return nil, fmt.Errorf("the arguments are not valid JSON (%w): %s; send the arguments as one JSON object", err, quoteHead(text))
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("the arguments must be a JSON object, got %s: %s", jsonKind(v), quoteHead(text))
	}
	return compactJSON(json.RawMessage(text)), nil
}

// historyMessage is m, an accepted reply, as history keeps it: a call
// whose arguments are not one JSON object (blank, invalid, cut off, not
// an object) keeps {} there, and a call without a name (empty or blank)
// is named UnnamedCall. Ollama, vLLM and llama.cpp parse the arguments of
// every call sent back to them and refuse the whole request otherwise
// (400 "invalid tool call arguments"), and OpenAI's API refuses a call
// without a name (400 "Invalid 'messages[1].tool_calls[0].function.name':
// empty string"), either failing the job one round later; the call's
// result quotes what the model wrote, and its tool.call event and the
// journaled answer keep the text as it came.
func historyMessage(m llm.Message) llm.Message {
	cloned := false
	for i, c := range m.ToolCalls {
		named := strings.TrimSpace(c.Function.Name) != ""
		if named && isObject(strings.TrimSpace(c.Function.Arguments)) {
			continue
		}
		if !cloned {
			m.ToolCalls, cloned = slices.Clone(m.ToolCalls), true
		}
		if !named {
			m.ToolCalls[i].Function.Name = UnnamedCall
		}
		if !isObject(strings.TrimSpace(c.Function.Arguments)) {
			m.ToolCalls[i].Function.Arguments = "{}"
		}
	}
	return m
}

// UnnamedCall is the name history gives a tool call that came without
// one (see historyMessage). It names no tool: its result says the call
// named none.
const UnnamedCall = "unnamed_tool_call"

// quoteHead quotes the first 200 bytes of s, on a rune boundary.
func quoteHead(s string) string {
	const n = 200
	if len(s) <= n {
		return strconv.Quote(s)
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("... (%d bytes)", len(s))
}

// unwrapStringArguments turns call_tool's {"arguments":"{...}"} (a common
// slip: the inner arguments JSON-encoded twice) into {"arguments":{...}}.
func unwrapStringArguments(args json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return args
	}
	var s string
	if json.Unmarshal(m["arguments"], &s) != nil {
		return args
	}
	inner, err := objectArgs(s)
	if err != nil {
		return args
	}
	m["arguments"] = inner
	b, err := json.Marshal(m)
	if err != nil {
		return args
	}
	return b
}

// argumentsAliases are the members models put a call_tool's arguments
// in instead of "arguments" (OpenAI's function definitions say
// "parameters", Anthropic's tool_use blocks "input").
var argumentsAliases = []string{"args", "parameters", "params", "input"}

// callToolArguments is call_tool's args with the tool's arguments where
// the schema has them, when a model wrote them otherwise: without
// "arguments" (a tool without parameters), beside "name" at the top
// ({"name":"get_weather","city":"Oslo"}), or under an alias of it
// ({"name":..., "parameters":{...}}) that the tool does not take as a
// parameter. A call that also names its arguments, or names no tool,
// is left as it is: its schema error says what is wrong. The tool's
// arguments are then checked against its own schema, as any call's.
func (r *registry) callToolArguments(args json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return args
	}
	var name string
	if _, has := m["arguments"]; has || json.Unmarshal(m["name"], &name) != nil {
		return args
	}
	delete(m, "name")
	inner, err := json.Marshal(m) // {} when name was all
	if err != nil {
		return args
	}
	if len(m) == 1 {
		for k, v := range m {
			if slices.Contains(argumentsAliases, k) && isObject(strings.TrimSpace(string(v))) && !r.takesParameter(name, k) {
				inner = v
			}
		}
	}
	b, err := json.Marshal(map[string]any{"name": name, "arguments": json.RawMessage(inner)})
	if err != nil {
		return args
	}
	return b
}

// takesParameter says whether the catalog's tool name (as call_tool
// resolves it) has a top-level parameter p.
func (r *registry) takesParameter(name, p string) bool {
	if n, ok := r.resolveCatalogName(name); ok {
		name = n
	}
	e, ok := r.byName[name]
	if !ok {
		return false
	}
	var sch struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(parameters(e.tool), &sch)
	_, ok = sch.Properties[p]
	return ok
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

func compactJSON(b json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// noOutput is what the model is shown for a tool result with no text.
const noOutput = "(the tool returned no output)"

// callEmitter is how c's events are published. A call an earlier attempt
// completed published its events then; replaying it publishes none
// (job.resumed counts them). Meta tools and resource reads are not
// journaled: they run again, quietly, in a round whose next answer is
// journaled (the round completed then).
func (j *job) callEmitter(round int, c *call) func(context.Context, string, int, map[string]any) {
	if _, ok := j.journaled(c); ok && j.in.Journal.Completed(c.key) || j.codeCompleted(c) || j.roundCompleted(round) {
		return func(context.Context, string, int, map[string]any) {}
	}
	return j.emit
}

// announce publishes c's tool.call event and returns c's emitter for
// run1. execute calls it from the loop's goroutine as each call starts, so
// a round's tool.call events come in the model's order, whichever call's
// goroutine runs first.
func (j *job) announce(ctx context.Context, round int, c *call) func(context.Context, string, int, map[string]any) {
	emit := j.callEmitter(round, c)
	emit(ctx, EventToolCall, round, map[string]any{
		"call_id":   c.tc.ID,
		"name":      c.tc.Function.Name,
		"arguments": c.tc.Function.Arguments,
	})
	return emit
}

// run1 runs c, announced, filling its output and record, and publishes
// its result with emit as it finishes: results of parallel calls come in
// the order they finish.
func (j *job) run1(ctx context.Context, round int, c *call, emit func(context.Context, string, int, map[string]any)) {
	start := time.Now()
	switch {
	case c.fault != "":
		c.output, c.isError = "Error: "+c.fault, true
	case len(c.invalid) > 0:
		c.output, c.isError = invalidMessage(c), true
	default:
		pctx := withProgress(ctx, round, emit, c.tc.ID, c.tc.Function.Name, toolName(c.target, c.tc.Function.Name), nil)
		c.output, c.isError = j.dispatchSafe(pctx, c)
	}
	c.ran = ctx.Err() == nil
	dur := time.Since(start)
	c.forModel = truncate(c.output, j.l.cfg.MaxToolOutput)
	truncated := len(c.forModel) != len(c.output)
	if strings.TrimSpace(c.forModel) == "" {
		// A tool that printed nothing (a write, a command without stdout):
		// Anthropic's API, also behind OpenAI-compatible proxies such as
		// LiteLLM, refuses a tool result without text ("text content
		// blocks must be non-empty"), which would fail the next request
		// after the call had run; and the model reads this as done.
		c.forModel = noOutput
	}
	if c.record != nil {
		// The reflected transcript is history for a continuation: it holds
		// what the model saw, as for a direct call (the event has it all).
		out := c.forModel
		c.record.Output = &out
	}
	if c.fatal != nil {
		return // the attempt ends; the call did not run
	}
	if c.status == journal.Interrupted {
		emit(ctx, EventToolInterrupted, round, map[string]any{
			"call_id":         c.tc.ID,
			"name":            c.tc.Function.Name,
			"tool":            toolName(c.target, c.tc.Function.Name),
			"idempotency_key": j.idempotencyKey(c),
		})
	}
	data := map[string]any{
		"call_id":     c.tc.ID,
		"name":        c.tc.Function.Name,
		"tool":        toolName(c.target, c.tc.Function.Name),
		"duration_ms": dur.Milliseconds(),
		"size":        len(c.output),
		"error":       c.isError,
		// Not "truncated": that flag marks an event reduced for NATS.
		"truncated_for_model": truncated,
		"output":              c.output,
	}
	if c.status != journal.Ran {
		data["journal"] = c.status.String()
	}
	emit(ctx, EventToolResult, round, data)
}

// journaled says whether c has an effect to journal (a tool or client-tool
// call, directly or through call_tool) and returns the journal's call.
// Meta tools and resource reads only read: they run again freely.
func (j *job) journaled(c *call) (journal.Call, bool) {
	if j.in.Journal == nil || c.key == "" || c.fault != "" || len(c.invalid) > 0 || c.target == nil {
		return journal.Call{}, false
	}
	if c.target.kind != kindMCP && c.target.kind != kindClient {
		return journal.Call{}, false
	}
	return journal.Call{
		Name:           c.target.tool.Name,
		Args:           c.targetArgs,
		IdempotencyKey: j.idempotencyKey(c),
		Resendable:     resendable(c.target.tool.Annotations),
	}, true
}

// idempotencyKey is the same in every attempt: the job id and the call id
// (kept across attempts by the journaled answer).
func (j *job) idempotencyKey(c *call) string { return j.in.JobID + "/" + c.tc.ID }

// resendable: a call the tool's hints say may run twice without harm.
func resendable(a toolcache.Annotations) bool {
	return (a.ReadOnlyHint != nil && *a.ReadOnlyHint) || (a.IdempotentHint != nil && *a.IdempotentHint)
}

// effect runs one call with an effect through the journal, when the job
// has one.
func (j *job) effect(ctx context.Context, c *call, run func(context.Context) (journal.Result, error)) (_ journal.Result, err error) {
	jc, ok := j.journaled(c)
	if !ok {
		return run(ctx)
	}
	defer j.recoverJournal(c, &err) // run recovers its own (runEffect): this is the journal's
	res, st, err := j.in.Journal.Do(ctx, c.key, jc, run)
	c.status = st
	if errors.Is(err, journal.ErrUnavailable) || errors.Is(err, journal.ErrDiverged) {
		c.fatal = err
	}
	return res, err
}

func toolName(e *entry, fallback string) string {
	if e == nil {
		return fallback
	}
	return e.tool.Name
}

func invalidMessage(c *call) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Error: invalid arguments for tool %s:\n", c.target.tool.Name)
	for _, e := range c.invalid {
		fmt.Fprintf(&b, "- %s\n", e)
	}
	fmt.Fprintf(&b, "Input schema of %s: %s", c.target.tool.Name, parameters(c.target.tool))
	return b.String()
}

// dispatch runs e with args (already validated) and returns the output for
// the model. viaCallTool marks the real call behind call_tool.
func (j *job) dispatch(ctx context.Context, callID string, e *entry, args json.RawMessage, viaCallTool bool, c *call) (string, bool) {
	switch e.kind {
	case kindMCP:
		res, err := j.effect(ctx, c, j.runEffect(e, args))
		if err != nil {
			return "Error: " + err.Error(), true
		}
		return resultText(toolcache.Result{Text: res.Text, Structured: res.Structured, IsError: res.IsError}), res.IsError
	case kindClient:
		res, err := j.effect(ctx, c, j.runEffect(e, args))
		out, isErr := res.Text, res.IsError || err != nil
		if err != nil {
			out = "Error: " + err.Error()
		}
		if !viaCallTool {
			// Recorded so the transcript shows who answered it.
			c.record = &reflect.Record{ID: callID, CallID: callID, Kind: reflect.KindClientTool, Name: e.tool.Name, Input: args, Output: &out, IsError: isErr}
		}
		return out, isErr
	case kindListResources, kindReadResource:
		out, isErr, err := runResource(ctx, j.in.Tools, e.kind, args)
		if err != nil {
			return "Error: " + err.Error(), true
		}
		return out, isErr
	case kindSearchTools, kindGetToolDetails:
		return j.runMeta(ctx, e.kind, args)
	case kindExecuteCode:
		return j.runCode(ctx, c.round, c, args)
	case kindCallTool:
		out, isErr := j.dispatch(ctx, callID, c.target, c.targetArgs, true, c)
		c.record = &reflect.Record{
			ID: callID, CallID: callID, Kind: reflect.KindCallTool,
			Name: c.target.tool.Name, Input: c.targetArgs, Output: &out, IsError: isErr,
		}
		return out, isErr
	}
	return fmt.Sprintf("Error: tool %q cannot be dispatched", e.tool.Name), true
}

// resultText flattens an MCP result for the model; structured content
// stands in when there is no text.
func resultText(r toolcache.Result) string {
	text := r.Text
	if text == "" && len(r.Structured) > 0 {
		text = string(r.Structured)
	}
	if r.IsError && !strings.HasPrefix(strings.ToLower(text), "error") {
		text = "Error: " + text
	}
	return text
}

// truncate cuts s to at most max bytes (on a rune boundary) and says so.
func truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	note := fmt.Sprintf("\n\n[output truncated: the first %d of %d bytes are shown]", 0, len(s))
	cut := max - len(note) - 8 // room for the digits of the shown count
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n\n[output truncated: the first %d of %d bytes are shown]", cut, len(s))
}
