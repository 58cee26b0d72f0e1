package agentloop

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/reflect"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// Notes the loop adds to requests. finalNote enters history (the model
// answers it); the others are ephemeral.
const (
	finalNote = "You have used all the tool rounds available for this task. Tools are no longer available: " +
		"give your final answer now, based on what you have found so far."
	emptyNote      = "Your previous reply was empty. Continue the task: call a tool, or give your final answer."
	finalEmptyNote = "Your previous reply held no answer. Tools are no longer available: answer in plain text now, " +
		"based on what you have found so far."
	// reaskNote and finalReaskNote follow an answer that looks like a
	// failed tool call (debrisReason says why); callAPINote ends a schema
	// retry for a call read from the text.
	reaskNote = "Your previous reply was not accepted as an answer: it looks like a tool call written into the text, " +
		"and %s. Tools are called through the tools API (the tool_calls of your reply, with the arguments as one " +
		"JSON object matching the tool's schema), never by writing the call into the text. Reply again: call the " +
		"tool through the tools API, or, if you need no tool, give your final answer in plain text, without call markup."
	finalReaskNote = "Your previous reply was not an answer: it looks like a tool call written into the text, and %s. " +
		"Tools are no longer available: answer in plain text now, based on what you have found so far, without call markup."
	callAPINote = "\nCall tools through the tools API (the tool_calls of your reply), not by writing calls into the text."
	// malformedNote follows a reply whose tool call the server could not
	// read (Gemini's finish_reason MALFORMED_FUNCTION_CALL).
	malformedNote = "Your previous reply was not accepted: %s. Reply again: call the tool through the tools API, with the " +
		"arguments as one JSON object matching the tool's schema, or, if you need no tool, give your final answer in plain text."
	// reaskContentMax bounds the reply quoted by a content_call.reask event.
	reaskContentMax = 2 << 10
)

// job is one Run: the loop's per-job state.
type job struct {
	l         *Loop
	in        Input
	sink      Sink
	reg       *registry
	mode      Mode
	tools     []llm.Tool // the tools array of every ordinary request
	toolToks  int
	fullToks  int
	maxRounds int
	// contentMode is the content-call mode of the job's model.
	contentMode ContentCallMode
	// model names the job's model in its errors ("" when unknown).
	model string

	messages []llm.Message
	records  []reflect.Record
	usage    Usage
	rounds   int // completed rounds
	// callIDs are the tool call ids in messages and records: a new call
	// must not reuse one, since results and records are matched by id.
	callIDs map[string]bool
	// doing is what the job is at (waiting for the model, running a
	// round's calls), named by the error of a job whose context ends.
	doing string
	// mistralIDs: the server refused a call id that is not Mistral's 9
	// letters or digits, so every request is sent with such ids replaced.
	mistralIDs bool
	// compact: the server refused a request over the model's context
	// window; every request is sent with the tool outputs cut to this
	// level (compact.go).
	compact int
}

// liveGetter is a ToolSet that finds a tool in its current catalog
// (toolcache.View), which can have grown since the job's started.
type liveGetter interface {
	Get(name string) (toolcache.Tool, bool)
}

// unavailableLister is a ToolSet that names its servers that are down
// with no tools listed (toolcache.View), whose tools are therefore missing
// from the job's catalog.
type unavailableLister interface {
	Unavailable() []toolcache.ServerStatus
}

// callNames names the tools of calls (the real one behind call_tool),
// each once, at most five; a call of an unknown name runs nothing.
func callNames(calls []*call) string {
	var names []string
	for _, c := range calls {
		if c.target == nil {
			continue
		}
		if n := c.target.tool.Name; !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
	}
	return strings.Join(names, ", ")
}

// Run runs one job to its end. It returns a Result also on error, with
// StopReason saying why it stopped; on cancellation or timeout it returns
// promptly with the context's error wrapped.
func (l *Loop) Run(ctx context.Context, in Input) (*Result, error) {
	j, err := l.newJob(ctx, in)
	if err != nil {
		res := &Result{StopReason: stopReason(ctx), Mode: in.Mode}
		l.emitOutcome(ctx, in.Sink, res, err)
		return res, err
	}
	j.emitResumed(ctx)
	res, err := j.run(ctx)
	l.emitOutcome(ctx, j.sink, res, err)
	return res, err
}

func (l *Loop) emitOutcome(ctx context.Context, sink Sink, res *Result, err error) {
	if sink == nil {
		return
	}
	data := map[string]any{
		"stop_reason":               res.StopReason,
		"rounds":                    res.Rounds,
		"mode":                      string(res.Mode),
		"prompt_tokens":             res.Usage.PromptTokens,
		"completion_tokens":         res.Usage.CompletionTokens,
		"cached_prompt_tokens":      res.Usage.CachedPromptTokens,
		"tool_def_tokens":           res.Usage.ToolDefTokens,
		"full_mode_tool_def_tokens": res.Usage.FullModeToolDefTokens,
	}
	if err != nil {
		data["error"] = err.Error()
	}
	// The outcome is reported even when ctx has ended.
	sink.Emit(context.WithoutCancel(ctx), Event{Type: EventLoopOutcome, Round: res.Rounds, Data: data})
}

// newJob validates in, builds the registry and the tools array.
func (l *Loop) newJob(ctx context.Context, in Input) (*job, error) {
	j := &job{l: l, in: in, sink: in.Sink, callIDs: map[string]bool{}}
	if j.sink == nil {
		j.sink = nopSink{}
	}
	if in.Resume == nil && strings.TrimSpace(in.Task) == "" {
		return nil, fmt.Errorf("%w: task is empty", ErrConfig)
	}
	if in.Resume != nil && len(in.Resume.Messages) == 0 {
		return nil, fmt.Errorf("%w: resume state has no messages", ErrConfig)
	}
	if in.Resume != nil && in.Resume.Round < 0 {
		// It ran rounds -2, -1, 0 ... under journal keys and events of no
		// round the loop makes.
		return nil, fmt.Errorf("%w: resume state's round %d is negative", ErrConfig, in.Resume.Round)
	}
	if in.Resume == nil {
		if err := llm.CheckHistory(in.History); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	} else if err := llm.CheckHistory(in.Resume.Messages); err != nil {
		// The loop's checkpoints pass (every round enters history whole);
		// one from elsewhere, or damaged, would go to the model as it is
		// and be refused there (a 400) after the job was taken.
		return nil, fmt.Errorf("%w: resume state's messages are no chat history a model takes: %w", ErrConfig, err)
	}
	if in.MaxRounds < 0 {
		return nil, fmt.Errorf("%w: max_rounds %d is negative", ErrConfig, in.MaxRounds)
	}
	j.maxRounds = in.MaxRounds
	if j.maxRounds == 0 {
		j.maxRounds = l.cfg.DefaultMaxRounds
	}
	j.maxRounds = min(j.maxRounds, l.cfg.MaxRoundsCap)
	model := in.Model
	if m, ok := l.cfg.LLM.(interface{ Model() string }); ok && model == "" {
		model = m.Model() // *llm.Client: the model of requests that name none
	}
	j.contentMode = l.cfg.ContentCalls.For(model)
	j.model = model
	if len(in.ClientTools) > 0 && in.ClientCaller == nil {
		return nil, fmt.Errorf("%w: client tools declared without a ClientCaller", ErrConfig)
	}

	mode := in.Mode
	if mode == "" {
		mode = l.cfg.DefaultMode
	}
	if m := journaledMode(in.Journal); m != "" {
		mode = m // keep the tools array of the interrupted run
	}
	if in.Resume != nil && in.Resume.Mode != "" {
		mode = in.Resume.Mode
	}
	if !mode.Valid() {
		return nil, fmt.Errorf("%w: unknown tool mode %q", ErrConfig, mode)
	}

	cat, count, err := j.catalog(ctx)
	if err != nil {
		return nil, j.maskBuildPanic(err)
	}
	j.reg = newRegistry(cat)
	if g, ok := in.Tools.(liveGetter); ok {
		j.reg.live = g.Get
	}
	if u, ok := in.Tools.(unavailableLister); ok {
		j.reg.unavailable = u.Unavailable
	}
	for _, c := range cat.clashes {
		j.emit(ctx, EventToolClash, 0, c)
	}
	if _, j.fullToks, err = cat.fullTools(count); err != nil {
		return nil, j.maskBuildPanic(err)
	}
	if mode == ModeAuto {
		mode = l.cfg.AutoThresholds.Choose(j.fullToks)
	}
	j.mode = mode
	if j.tools, j.toolToks, err = cat.toolsFor(mode, count); err != nil {
		return nil, j.maskBuildPanic(err)
	}
	switch mode {
	case ModeSearch:
		j.reg.addMeta()
	case ModeCode:
		j.reg.addCode(cat.codeCatalog())
	}
	if len(j.reg.catalog) == 0 {
		// Nothing to call: send no tools at all rather than an empty
		// catalog behind meta tools.
		j.tools, j.toolToks, j.fullToks = nil, 0, 0
	}

	if r := in.Resume; r != nil {
		j.messages = slices.Clone(r.Messages)
		j.records = slices.Clone(r.Records)
		for _, rec := range r.Records {
			j.callIDs[rec.ID] = true
		}
		j.usage = r.Usage
		j.rounds = r.Round
	} else {
		system, history := systemPrompt(in.System, l.cfg.DefaultSystem, sendableArguments(portableHistory(in.History)))
		if system != "" {
			j.messages = append(j.messages, llm.Message{Role: llm.RoleSystem, Content: system})
		}
		j.messages = append(j.messages, history...)
		j.messages = append(j.messages, llm.Message{Role: llm.RoleUser, Content: in.Task})
	}
	for _, m := range j.messages {
		j.noteCallIDs(m)
	}
	return j, nil
}

// catalog returns the job's catalog: MCP tools, then client tools (a
// server tool wins a name clash), then the resource bridge when the
// servers list any resource. A ToolSet that names its catalog version
// (toolcache.View: catalogKeyer) shares one catalog, its tools arrays,
// token counts and validators with every job of the same version,
// selection, client tools and bridge, built by the first; another ToolSet
// gets the job's own. count is how the catalog's arrays are counted.
func (j *job) catalog(ctx context.Context) (*catalog, func([]llm.Tool) (int, error), error) {
	resources := false
	if j.in.Tools != nil {
		res, err := j.in.Tools.ListResources(ctx)
		if err != nil && ctx.Err() != nil {
			return nil, nil, fmt.Errorf("agentloop: listing resources: %w", err)
		}
		// A server failing to list resources loses only the bridge.
		resources = err == nil && len(res) > 0
	}
	build := func() (*catalog, error) { return j.buildCatalog(resources) }
	k, ok := j.in.Tools.(catalogKeyer)
	if !ok {
		// A listing that panics is the job's error, as a shared build's
		// is (tokenCache.catalog): on the job's goroutine it failed the
		// job with the value unmasked, or ended the process.
		var c *catalog
		var err error
		if p := safely(func() { c, err = build() }); p != nil {
			return nil, nil, p
		}
		return c, j.l.tokens.count, err
	}
	version, selection := k.CatalogKey()
	key := catalogKey{version: version, selection: selection, client: clientDigest(j.in.ClientTools), resources: resources}
	c, err := j.l.tokens.catalog(key, build)
	return c, ToolTokens, err // counted once per catalog (modeTools)
}

// toolAllower is a ToolSet that selects a job's tools by globs
// (toolcache.View): it says whether they admit a tool that is not a
// server's.
type toolAllower interface {
	AllowsTool(name string) bool
}

// buildCatalog gathers a catalog from the job's ToolSet and client tools.
func (j *job) buildCatalog(resources bool) (*catalog, error) {
	c := newCatalog()
	if j.in.Tools != nil {
		for _, t := range j.in.Tools.Tools() {
			c.add(t, kindMCP)
		}
	}
	for _, ct := range j.in.ClientTools {
		if !toolNameRE.MatchString(ct.Name) {
			return nil, fmt.Errorf("%w: client tool name %q must match %s", ErrConfig, ct.Name, toolNameRE)
		}
		if e, clash := c.byName[ct.Name]; clash {
			c.clashes = append(c.clashes, map[string]any{"name": ct.Name, "server": e.tool.Server, "winner": "server"})
			continue
		}
		params, err := toolcache.NormalizeSchema(ct.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("%w: client tool %q: input_schema: %w", ErrConfig, ct.Name, err)
		}
		schema := ct.InputSchema
		if len(strings.TrimSpace(string(schema))) == 0 {
			schema = params
		}
		c.add(toolcache.Tool{Name: ct.Name, Original: ct.Name, Description: ct.Description, InputSchema: schema, Parameters: params}, kindClient)
	}
	if resources {
		allower, _ := j.in.Tools.(toolAllower)
		for _, t := range resourceTools() {
			if allower != nil && !allower.AllowsTool(t.Name) {
				continue // the job's allow/deny globs cover the bridge too
			}
			kind := kindListResources
			if t.Name == ToolReadResource {
				kind = kindReadResource
			}
			c.add(t, kind)
		}
	}
	return c, nil
}

// clientDigest names a job's client tool declarations ("" for none).
func clientDigest(decls []clienttools.Decl) string {
	if len(decls) == 0 {
		return ""
	}
	h := sha256.New()
	for _, d := range decls {
		for _, f := range []string{d.Name, d.Description, string(d.InputSchema)} {
			fmt.Fprintf(h, "%d:%s", len(f), f)
		}
	}
	return string(h.Sum(nil))
}

func (j *job) emit(ctx context.Context, typ string, round int, data map[string]any) {
	j.sink.Emit(ctx, Event{Type: typ, Round: round, Data: data})
}

// run is the round loop.
func (j *job) run(ctx context.Context) (*Result, error) {
	for j.rounds < j.maxRounds {
		round := j.rounds + 1
		j.doing = fmt.Sprintf("waiting for the model's reply in round %d", round)
		turn, err := j.turn(ctx, round)
		if err != nil {
			return j.fail(ctx, err)
		}
		if len(turn.calls) == 0 {
			j.messages = append(j.messages, turn.msg)
			return j.result(turn.msg.Content, StopFinalAnswer), nil
		}
		j.doing = fmt.Sprintf("running the tool calls of round %d (%s)", round, callNames(turn.calls))
		toolMsgs, recs := j.execute(ctx, round, turn.calls)
		if ctx.Err() != nil {
			// The round is incomplete: no checkpoint or journaled answer
			// holds it (a resumed attempt runs it from the journal). The
			// transcripts do, each call that did not finish before the
			// context ended saying so: a continuation of a cancelled or
			// timed-out job must not take calls that may have run for
			// calls never made.
			j.messages = append(j.messages, historyMessage(turn.msg))
			j.messages = append(j.messages, cutRound(ctx, turn.calls, toolMsgs)...)
			j.records = append(j.records, cutRecords(ctx, turn.calls)...)
			return j.fail(ctx, ctx.Err())
		}
		for _, c := range turn.calls {
			if c.fatal != nil {
				return j.fail(ctx, c.fatal)
			}
		}
		j.messages = append(j.messages, historyMessage(turn.msg))
		j.noteCallIDs(turn.msg)
		j.messages = append(j.messages, toolMsgs...)
		j.records = append(j.records, recs...)
		for _, r := range recs {
			j.callIDs[r.ID] = true
		}
		j.rounds = round
		j.checkpoint(ctx)
	}

	// Rounds ran out: one last request without tools for the final answer.
	round := j.rounds + 1
	j.messages = append(j.messages, llm.Message{Role: llm.RoleUser, Content: finalNote})
	j.doing = fmt.Sprintf("waiting for the model's final answer (round %d, max_rounds reached)", round)
	answer, err := j.journaledFinalAnswer(ctx, round)
	if err != nil {
		return j.fail(ctx, err)
	}
	j.messages = append(j.messages, llm.Message{Role: llm.RoleAssistant, Content: answer})
	return j.result(answer, StopMaxRounds), nil
}

// finalAnswer asks for the answer without tools. Tool calls are no answer
// now: sent as tool_calls, or written into the content (which servers do
// not parse in a request without tools), they are dropped; a reply with
// nothing else, or with only what looks like a failed call, is asked again
// once, ephemerally.
func (j *job) finalAnswer(ctx context.Context, round int) (string, error) {
	msgs := j.messages
	var tools []llm.Tool
	toolToks, choice := 0, ""
	for attempt := 0; ; attempt++ {
		resp, err := j.complete(ctx, round, attempt, msgs, tools, toolToks, choice)
		if err != nil && tools == nil && len(j.tools) > 0 && toolsRequired(err) {
			// A server that refuses tool calls in history without tools
			// (LiteLLM in front of Anthropic or Bedrock, Bedrock itself)
			// gets them, none to be called.
			tools, toolToks, choice = j.tools, j.toolToks, "none"
			resp, err = j.complete(ctx, round, attempt, msgs, tools, toolToks, choice)
		}
		if err != nil {
			return "", err
		}
		if classifyFinish(resp.FinishReason) == finishLength {
			// Cut off: tool calls are no answer now, and the text is partial.
			resp.Message.ToolCalls = nil
			return "", j.modelErr(replyError(resp))
		}
		text, reason := resp.Message.Content, ""
		// dropped names the calls the reply made instead of answering.
		var dropped []string
		for _, c := range resp.Message.ToolCalls {
			dropped = append(dropped, c.Function.Name)
		}
		if j.contentMode != ContentCallsOff {
			var calls []llm.ToolCall
			calls, text = extractContentCalls(text, round, j.toolSchema)
			for _, c := range calls {
				dropped = append(dropped, c.Function.Name)
			}
			if calls, rest := readNearMiss(text, j.toolSchema); len(calls) > 0 {
				text = rest
				for _, c := range calls {
					dropped = append(dropped, c.name)
				}
			}
		}
		text = answerText(text)
		if j.contentMode != ContentCallsOff && strings.TrimSpace(text) != "" {
			reason = debrisReason(text, j.toolSchema)
		}
		if classifyFinish(resp.FinishReason) == finishMalformedCall {
			reason = malformedReason(resp.FinishReason) // a call, so no answer
		}
		if strings.TrimSpace(text) != "" && reason == "" {
			return text, nil
		}
		if attempt > 0 {
			if reason != "" {
				return "", j.modelErr(fmt.Errorf("%w: %s", ErrMalformedCall, reason))
			}
			if len(dropped) > 0 && strings.TrimSpace(text) == "" {
				// Not "no tool call": the reply had calls, which the last
				// request can no longer run.
				return "", j.modelErr(fmt.Errorf("%w, also when asked again: only tool calls (%s), which cannot run: max_rounds (%d) was reached and the last request offered no tools (finish_reason %q)",
					ErrEmptyResponse, quoteHead(strings.Join(dropped, ", ")), j.rounds, resp.FinishReason))
			}
			return "", j.emptyErr(resp)
		}
		note := finalEmptyNote
		if reason != "" {
			note = fmt.Sprintf(finalReaskNote, reason)
			j.emitReask(ctx, round, attempt, reason, resp.Message.Content, true)
		}
		msgs = append(slices.Clone(j.messages), llm.Message{Role: llm.RoleUser, Content: note})
	}
}

// toolSchema returns the schema of a tool the model may call directly.
func (j *job) toolSchema(name string) (json.RawMessage, bool) {
	e, ok := j.reg.lookup(name)
	if !ok {
		return nil, false
	}
	return parameters(e.tool), true
}

func (j *job) result(answer, stop string) *Result {
	return &Result{
		Answer:     answer,
		Messages:   slices.Clone(j.messages),
		Records:    slices.Clone(j.records),
		Usage:      j.usage,
		Rounds:     j.rounds,
		StopReason: stop,
		Mode:       j.mode,
	}
}

// fail ends the job, classifying context ends as timeout or cancellation.
func (j *job) fail(ctx context.Context, err error) (*Result, error) {
	if ctx.Err() != nil {
		// The context's end, and what it cut short: "job timed out"
		// alone did not tell a model that never answered from a tool.
		err = &StoppedError{Err: ctx.Err(), While: j.doing}
	}
	return j.result("", stopReason(ctx)), fmt.Errorf("agentloop: job %q: %w", j.in.JobID, err)
}

// stopReason tells a context's end (timeout, cancellation) from an error.
func stopReason(ctx context.Context) string {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return StopTimeout
	case ctx.Err() != nil:
		return StopCancelled
	}
	return StopError
}

func (j *job) checkpoint(ctx context.Context) {
	if j.in.Checkpoints == nil {
		return
	}
	s := Checkpoint{
		Messages: slices.Clone(j.messages),
		Round:    j.rounds,
		Records:  slices.Clone(j.records),
		Usage:    j.usage,
		Mode:     j.mode,
	}
	if err := j.in.Checkpoints.Save(ctx, s); err != nil {
		j.emit(ctx, EventCheckpointFailed, j.rounds, map[string]any{"error": err.Error()})
	}
}

// toolsRequired reports whether err is a server's refusal of a request
// that offers no tools while its history holds tool calls: LiteLLM's
// "doesn't support tool calling without `tools=` param specified" (for
// Anthropic, Bedrock, Vertex), Bedrock's "The toolConfig field must be
// defined when using toolUse and toolResult content blocks".
func toolsRequired(err error) bool {
	var apiErr *llm.APIError
	if !errors.As(err, &apiErr) || apiErr.Status < 400 || apiErr.Status >= 500 {
		return false
	}
	m := strings.ToLower(apiErr.Message)
	return strings.Contains(m, "tools=") || strings.Contains(m, "toolconfig")
}

// userAfterToolRefused reports whether err is a server's refusal of a
// user message right after tool results: Mistral's API and chat format
// (also Mistral models on vLLM and NIM) want an assistant turn there, and
// the loop's notes (the final request's, a nudge, a retry's) are user
// messages.
func userAfterToolRefused(err error) bool {
	var apiErr *llm.APIError
	if !errors.As(err, &apiErr) || apiErr.Status < 400 || apiErr.Status >= 500 {
		return false
	}
	return strings.Contains(strings.ToLower(apiErr.Message), "unexpected role 'user' after role 'tool'")
}

// foldUserAfterTool returns msgs with each user message that directly
// follows a tool message appended to that tool message's content instead
// (ok false when there is none). The model still reads the note, after
// the results, and the request is one those servers take.
func foldUserAfterTool(msgs []llm.Message) ([]llm.Message, bool) {
	var out []llm.Message
	folded := false
	for _, m := range msgs {
		if n := len(out); m.Role == llm.RoleUser && n > 0 && out[n-1].Role == llm.RoleTool {
			out[n-1].Content += "\n\n" + m.Content
			folded = true
			continue
		}
		out = append(out, m)
	}
	return out, folded
}

// oneCallRefused reports whether err is a chat template's refusal of a
// turn with several tool calls: Llama 3's ("This model only supports
// single tool-calls at once!", on vLLM, NIM, llama.cpp; a 400, or a 500
// that was retried first).
func oneCallRefused(err error) bool {
	var apiErr *llm.APIError
	return errors.As(err, &apiErr) && strings.Contains(strings.ToLower(apiErr.Message), "only supports single tool-calls")
}

// splitParallelCalls returns msgs with each assistant turn of several
// calls given as one turn per call, each followed by its result (ok false
// when there is none): the same calls and results, in their order.
func splitParallelCalls(msgs []llm.Message) ([]llm.Message, bool) {
	var out []llm.Message
	split := false
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role != llm.RoleAssistant || len(m.ToolCalls) < 2 {
			out = append(out, m)
			continue
		}
		split = true
		var results []llm.Message // the turn's, in order
		for i+1 < len(msgs) && msgs[i+1].Role == llm.RoleTool {
			i++
			results = append(results, msgs[i])
		}
		used := make([]bool, len(results))
		for k, c := range m.ToolCalls {
			turn := m // the first keeps the text and the reasoning
			if k > 0 {
				turn = llm.Message{Role: llm.RoleAssistant}
			}
			turn.ToolCalls = []llm.ToolCall{c}
			out = append(out, turn)
			for r := range results {
				if !used[r] && results[r].ToolCallID == c.ID {
					used[r] = true
					out = append(out, results[r])
					break
				}
			}
		}
		for r := range results {
			if !used[r] {
				out = append(out, results[r])
			}
		}
	}
	return out, split
}

// complete sends one request and accounts for it. fullToks is what full
// mode would have sent for it (0 for the tool-less final request).
// toolChoice is the request's tool_choice ("" for none sent).
func (j *job) complete(ctx context.Context, round, attempt int, msgs []llm.Message, tools []llm.Tool, toolToks int, toolChoice string) (llm.Response, error) {
	fullToks := 0
	if tools != nil {
		fullToks = j.fullToks
	}
	send := func(msgs []llm.Message) (llm.Response, error) {
		j.emit(ctx, EventLLMRequest, round, map[string]any{
			"retry":           attempt,
			"message_count":   len(msgs),
			"tool_count":      len(tools),
			"tool_def_tokens": toolToks,
			"mode":            string(j.mode),
		})
		j.usage.ToolDefTokens += int64(toolToks)
		j.usage.FullModeToolDefTokens += int64(fullToks)
		return j.l.cfg.LLM.Complete(ctx, llm.Request{Model: j.in.Model, Messages: msgs, Tools: tools, ToolChoice: toolChoice})
	}
	// Servers whose chat format refuses a shape of history the loop made
	// get it again in a shape they take (the request only), each rewrite
	// at most once, in whichever order the server refuses them (Mistral's
	// API refuses both ids and notes after tool results); a history over
	// the model's context window is cut (compact.go). Each request is
	// built from the loop's messages with every fix found so far.
	rewrites := []struct {
		refused func(error) bool
		rewrite func([]llm.Message) ([]llm.Message, bool)
		done    bool // tried
		applied bool
	}{{refused: userAfterToolRefused, rewrite: foldUserAfterTool}, {refused: oneCallRefused, rewrite: splitParallelCalls},
		{refused: mistralIDsRefused, rewrite: mistralIDs}}
	const mistral = 2
	orig := msgs
	build := func() []llm.Message {
		m, _ := cutHistory(orig, j.compact)
		for i, f := range rewrites {
			if f.applied && i != mistral {
				if r, ok := f.rewrite(m); ok {
					m = r
				}
			}
		}
		if j.mistralIDs {
			// Refused once already: every later request holds those ids too.
			m, _ = mistralIDs(m)
		}
		return m
	}
	msgs = build()
	resp, err := send(msgs)
	for again := true; err != nil && again; {
		again = false
		for i := range rewrites {
			f := &rewrites[i]
			if f.done || !f.refused(err) {
				continue
			}
			f.done = true
			if _, ok := f.rewrite(msgs); ok {
				f.applied = true
				if i == mistral {
					j.mistralIDs = true
				}
				msgs = build()
				resp, err = send(msgs)
				again = true
				break
			}
		}
		for !again && contextExceeded(err) && j.compact < maxCompactLevel {
			j.compact++
			if _, c, ok := compactHistory(orig, j.compact); ok {
				var apiErr *llm.APIError
				errors.As(err, &apiErr)
				j.emit(ctx, EventContextCompacted, round, map[string]any{
					"retry": attempt, "level": j.compact, "cut_outputs": c.messages, "cut_bytes": c.bytes, "error": apiErr.Message,
				})
				msgs = build()
				resp, err = send(msgs)
				again = true
			}
		}
	}
	if contextExceeded(err) {
		err = stillOver(err, orig, j.compact)
	}
	if apiErr := (*llm.APIError)(nil); errors.As(err, &apiErr) && apiErr.Code == toolUseFailed {
		// Groq refuses a reply whose tool call its parser could not read
		// (intermittent with Llama and Kimi models), quoting what the
		// model wrote: that is the reply, whose call the content-call
		// reader may recover, or which is asked again like Gemini's
		// MALFORMED_FUNCTION_CALL. It failed the job at once.
		resp, err = llm.Response{Message: llm.Message{Role: llm.RoleAssistant, Content: apiErr.FailedGeneration}, FinishReason: toolUseFailed}, nil
	}
	if err != nil {
		return resp, j.modelErr(err)
	}
	j.usage.Add(resp.Usage)
	j.emit(ctx, EventLLMResponse, round, map[string]any{
		"retry":                attempt,
		"finish_reason":        resp.FinishReason,
		"prompt_tokens":        resp.Usage.PromptTokens,
		"completion_tokens":    resp.Usage.CompletionTokens,
		"cached_prompt_tokens": resp.Usage.CachedPromptTokens,
		"tool_calls":           len(resp.Message.ToolCalls),
		"content_bytes":        len(resp.Message.Content),
	})
	if err := replyError(resp); err != nil {
		return resp, j.modelErr(err)
	}
	return resp, nil
}

// modelErr names the job's model in err, an error of or about its reply.
func (j *job) modelErr(err error) error {
	if j.model == "" {
		return err
	}
	return fmt.Errorf("model %q: %w", j.model, err)
}

// emptyErr is ErrEmptyResponse for resp, the reply to the nudge.
func (j *job) emptyErr(resp llm.Response) error {
	what := "no text and no tool call"
	m := resp.Message
	switch {
	case strings.TrimSpace(m.Content) != "":
		what = "only reasoning, no answer"
	case len(m.ReasoningContent) > 0 || len(m.Reasoning) > 0 || len(m.ReasoningDetails) > 0:
		// A reasoning parser moved it out of the content.
		what = "only reasoning (in the reply's reasoning field), no answer"
	}
	if resp.Error != "" {
		what += ", the server's error: " + resp.Error
	}
	return j.modelErr(fmt.Errorf("%w, also when asked again: %s (finish_reason %q)", ErrEmptyResponse, what, resp.FinishReason))
}

// turn is a model reply accepted into history: the assistant message and
// its calls, prepared for execution.
type turn struct {
	msg   llm.Message
	calls []*call
}

// ask gets the round's reply. Invalid tool calls are retried ephemerally
// (the same request again, with the failing tools' full schemas and the
// errors; the failed reply never enters history), at most SchemaRetries
// times; an empty reply is retried once with a nudge, and an answer that
// looks like a failed call written into the text (debrisReason) once with
// a corrective note: if that one fails too, the job fails with
// ErrMalformedCall. Calls the tolerant reader took that are still invalid
// after the retries are dropped, never run.
func (j *job) ask(ctx context.Context, round int) (turn, error) {
	tools, toolToks := j.tools, j.toolToks
	var note string
	retries, nudged, reasked := 0, false, false
	for attempt := 0; ; attempt++ {
		msgs := j.messages
		if note != "" {
			msgs = append(slices.Clone(j.messages), llm.Message{Role: llm.RoleUser, Content: note})
		}
		resp, err := j.complete(ctx, round, attempt, msgs, tools, toolToks, "")
		if err != nil {
			return turn{}, err
		}
		// The reasoning goes with a turn of calls: thinking-mode servers
		// refuse a request whose tool-call turn lacks what they sent.
		msg := llm.Message{Role: llm.RoleAssistant, Content: resp.Message.Content, ToolCalls: resp.Message.ToolCalls,
			ReasoningContent: resp.Message.ReasoningContent, Reasoning: resp.Message.Reasoning, ReasoningDetails: resp.Message.ReasoningDetails}
		msg, origin := j.readContent(msg, round)
		// reask sends the corrective request, or ends the job when it
		// was sent already.
		reask := func(reason, format string) error {
			if reasked {
				return j.modelErr(fmt.Errorf("%w: %s", ErrMalformedCall, reason))
			}
			reasked, note = true, fmt.Sprintf(format, reason)
			tools, toolToks = j.tools, j.toolToks
			j.emitReask(ctx, round, attempt, reason, resp.Message.Content, false)
			return nil
		}
		if len(msg.ToolCalls) == 0 && classifyFinish(resp.FinishReason) == finishMalformedCall {
			// The model meant a call: its text, if any, is no answer.
			if err := reask(malformedReason(resp.FinishReason), malformedNote); err != nil {
				return turn{}, err
			}
			continue
		}
		if len(msg.ToolCalls) == 0 {
			if answer := answerText(msg.Content); strings.TrimSpace(answer) != "" {
				reason := j.debris(answer)
				if reason == "" {
					// An answer's reasoning is not needed again (servers drop
					// earlier turns' reasoning).
					msg.Content, msg.ReasoningContent, msg.Reasoning, msg.ReasoningDetails = answer, nil, nil, nil
					return turn{msg: msg}, nil
				}
				if err := reask(reason, reaskNote); err != nil {
					return turn{}, err
				}
				continue
			}
			if nudged {
				return turn{}, j.emptyErr(resp)
			}
			nudged, note = true, emptyNote
			tools, toolToks = j.tools, j.toolToks
			continue
		}
		msg.ToolCalls, origin = dropRepeatedCalls(msg.ToolCalls, origin)
		j.normalizeCalls(msg.ToolCalls)
		fixCallIDs(msg.ToolCalls, round, j.callIDs)
		calls := make([]*call, len(msg.ToolCalls))
		var invalid []*call
		fromText := false
		for i, tc := range msg.ToolCalls {
			calls[i] = j.prepare(tc)
			if classifyFinish(resp.FinishReason) == finishLength && calls[i].args == nil && calls[i].entry != nil {
				// Not the model's slip: asked again the same way, the call
				// would be cut off again.
				calls[i].fault += fmt.Sprintf(" (the reply was cut off at the output token limit, finish_reason %q, inside these arguments: "+
					"make the call smaller, or do the work in several calls)", resp.FinishReason)
			}
			if len(calls[i].invalid) > 0 {
				invalid = append(invalid, calls[i])
				fromText = fromText || origin[i] != ""
				j.emit(ctx, EventToolValidationFailed, round, map[string]any{
					"retry":     attempt,
					"call_id":   tc.ID,
					"name":      tc.Function.Name,
					"tool":      calls[i].target.tool.Name,
					"arguments": tc.Function.Arguments,
					"errors":    calls[i].invalid,
				})
			}
		}
		if len(invalid) == 0 || retries >= j.l.cfg.SchemaRetries {
			var reason string
			msg, calls, origin, reason = dropInvalidRecovered(msg, calls, origin)
			if len(calls) == 0 {
				if err := reask(reason, reaskNote); err != nil {
					return turn{}, err
				}
				continue
			}
			j.emitRecovered(ctx, round, attempt, msg.ToolCalls, origin)
			return turn{msg: msg, calls: calls}, nil
		}
		retries++
		tools, note = j.retryRequest(invalid)
		if fromText {
			note += callAPINote
		}
		if toolToks, err = j.l.tokens.count(tools); err != nil {
			return turn{}, err
		}
		names := make([]string, len(invalid))
		for i, c := range invalid {
			names[i] = c.target.tool.Name
		}
		j.emit(ctx, EventToolSchemaRetry, round, map[string]any{"retry": retries, "tools": names, "tool_def_tokens": toolToks})
	}
}

// normalizeCalls rewrites, in place, the names and arguments of calls
// that name a job's tool in another spelling (resolveName) or wrap their
// arguments object (repairArguments): the call that runs is the one the
// transcript shows, and the server is sent back arguments it can parse.
func (j *job) normalizeCalls(calls []llm.ToolCall) {
	for i := range calls {
		f := &calls[i].Function
		if name, ok := j.reg.resolveName(f.Name); ok {
			f.Name = name
		}
		if args, ok := repairArguments(f.Arguments); ok {
			f.Arguments = args
		}
	}
}

// readContent takes the tool calls written into msg's content, as the
// job's content-call mode says: the well-formed shapes first, else the
// tolerant reader's. origin says, per call of the returned message, ""
// for the reply's own tool_calls, else the shape it was written in.
func (j *job) readContent(msg llm.Message, round int) (llm.Message, []string) {
	origin := make([]string, len(msg.ToolCalls))
	native := len(msg.ToolCalls)
	if len(j.tools) == 0 || j.contentMode == ContentCallsOff || (native > 0 && j.contentMode != ContentCallsOn) {
		return msg, origin
	}
	calls, rest := extractContentCalls(msg.Content, round, j.toolSchema)
	shapes := slices.Repeat([]string{shapeMarkup}, len(calls))
	if len(calls) == 0 && native == 0 && j.mode == ModeCode {
		// Before the tolerant reader, which would take a line of the
		// script for a call. Not beside tool_calls ("on" mode): a reply
		// that sent its script to execute_code often shows it too, and
		// it would run twice.
		var codes []string
		codes, rest = codeBlockCalls(msg.Content, j.reg.code)
		for i, code := range codes {
			args, _ := json.Marshal(map[string]string{"code": code})
			calls = append(calls, llm.ToolCall{ID: callID(round*100 + i), Type: "function",
				Function: llm.FunctionCall{Name: ToolExecuteCode, Arguments: string(args)}})
			shapes = append(shapes, shapeCode)
		}
	}
	if len(calls) == 0 {
		var nm []nearMiss
		nm, rest = readNearMiss(msg.Content, j.toolSchema)
		for i, c := range nm {
			calls = append(calls, llm.ToolCall{ID: callID(round*100 + i), Type: "function",
				Function: llm.FunctionCall{Name: c.name, Arguments: c.args}})
			shapes = append(shapes, c.shape)
		}
	}
	if len(calls) == 0 {
		return msg, origin
	}
	msg.ToolCalls = slices.Clone(msg.ToolCalls)
	for i, c := range calls {
		dup := slices.ContainsFunc(msg.ToolCalls[:native], func(n llm.ToolCall) bool {
			return n.Function.Name == c.Function.Name &&
				string(compactJSON(json.RawMessage(n.Function.Arguments))) == string(compactJSON(json.RawMessage(c.Function.Arguments)))
		})
		if !dup { // on mode: a call sent both ways runs once
			msg.ToolCalls = append(msg.ToolCalls, c)
			origin = append(origin, shapes[i])
		}
	}
	msg.Content = rest
	return msg, origin
}

// debris is debrisReason for the job's tools and content-call mode.
func (j *job) debris(content string) string {
	if len(j.tools) == 0 || j.contentMode == ContentCallsOff {
		return ""
	}
	return debrisReason(content, j.toolSchema)
}

// dropInvalidRecovered removes the calls the tolerant reader took whose
// arguments are still invalid (those of tool_calls and of the well-formed
// shapes go on, their errors as results). reason says what was dropped.
func dropInvalidRecovered(msg llm.Message, calls []*call, origin []string) (llm.Message, []*call, []string, string) {
	var (
		keepMsg  []llm.ToolCall
		keep     []*call
		keepFrom []string
		dropped  []string
	)
	for i, c := range calls {
		if o := origin[i]; o != "" && o != shapeMarkup && len(c.invalid) > 0 {
			dropped = append(dropped, fmt.Sprintf("the call %s(%s) read from it has invalid arguments (%s)",
				c.tc.Function.Name, c.tc.Function.Arguments, strings.Join(c.invalid, "; ")))
			continue
		}
		keepMsg, keep, keepFrom = append(keepMsg, msg.ToolCalls[i]), append(keep, c), append(keepFrom, origin[i])
	}
	if len(dropped) == 0 {
		return msg, calls, origin, ""
	}
	msg.ToolCalls = keepMsg
	return msg, keep, keepFrom, strings.Join(dropped, "; ")
}

func (j *job) emitRecovered(ctx context.Context, round, attempt int, tcs []llm.ToolCall, origin []string) {
	var calls []map[string]any
	for i, tc := range tcs {
		if origin[i] != "" {
			calls = append(calls, map[string]any{"call_id": tc.ID, "name": tc.Function.Name, "arguments": tc.Function.Arguments, "shape": origin[i]})
		}
	}
	if len(calls) > 0 {
		j.emit(ctx, EventContentCallRecovered, round, map[string]any{"retry": attempt, "calls": calls})
	}
}

func (j *job) emitReask(ctx context.Context, round, attempt int, reason, content string, final bool) {
	if len(content) > reaskContentMax {
		cut := reaskContentMax
		for cut > 0 && !utf8.RuneStart(content[cut]) {
			cut--
		}
		content = content[:cut]
	}
	j.emit(ctx, EventContentCallReask, round, map[string]any{"retry": attempt, "reason": reason, "content": content, "final": final})
}

// fixCallIDs gives every call an id used nowhere else in the job's
// messages (used) nor in the reply: some servers send none, or the same
// one in every reply, and a continuation's history holds ids of an earlier
// job. Tool results and reflect records are matched by id. The real call
// behind a call_tool call keeps the model's id in the reflected transcript
// (one call for one), so reflected histories carry only ids that the
// provider itself issued or accepted (Mistral, for one, accepts only 9
// alphanumerics).
func fixCallIDs(calls []llm.ToolCall, round int, used map[string]bool) {
	seen := map[string]bool{}
	taken := func(id string) bool {
		return id == "" || seen[id] || used[id]
	}
	for i := range calls {
		if taken(calls[i].ID) {
			k := round*100 + i
			for taken(callID(k)) {
				k++
			}
			calls[i].ID = callID(k)
		}
		if calls[i].Type == "" {
			calls[i].Type = "function"
		}
		seen[calls[i].ID] = true
	}
}

// callID is the k-th id the loop makes up: "call" and five digits, since
// Mistral's API and chat templates accept only 9 letters or digits.
func callID(k int) string { return fmt.Sprintf("call%05d", k%100000) }

// noteCallIDs adds the call ids of m (an accepted message) to j.callIDs.
func (j *job) noteCallIDs(m llm.Message) {
	for _, c := range m.ToolCalls {
		j.callIDs[c.ID] = true
	}
	if m.ToolCallID != "" {
		j.callIDs[m.ToolCallID] = true
	}
}

// retryRequest builds the ephemeral retry: the tools array with the failing
// tools' full definitions (in deferred mode; search mode keeps its array
// byte-identical and full mode has them already), and a note stating each
// error with the full schema.
func (j *job) retryRequest(invalid []*call) ([]llm.Tool, string) {
	var b strings.Builder
	b.WriteString("Your previous reply was not accepted because these tool calls had invalid arguments:\n")
	// Each failing tool's schema is given once, long arguments by their
	// start, and at most retryNoteCalls calls: a reply of hundreds of
	// invalid calls, or of megabytes of arguments, made a note of as much.
	failing := map[string]toolcache.Tool{}
	var more []string
	for i, c := range invalid {
		t := c.target.tool
		_, shown := failing[t.Name]
		failing[t.Name] = t
		if i >= retryNoteCalls {
			if !slices.Contains(more, c.tc.Function.Name) {
				more = append(more, c.tc.Function.Name)
			}
			continue
		}
		fmt.Fprintf(&b, "\n- %s(%s):\n", c.tc.Function.Name, argumentsHead(c.tc.Function.Arguments))
		for _, e := range c.invalid {
			fmt.Fprintf(&b, "  - %s\n", e)
		}
		if p := parameters(t); !shown && len(p) > maxQuotedSchema {
			fmt.Fprintf(&b, "  The input schema of %s (%d KiB) is too large to quote; the errors above say what to change.\n", t.Name, len(p)>>10)
		} else if !shown {
			fmt.Fprintf(&b, "  Full input schema of %s: %s\n", t.Name, p)
		}
	}
	if len(more) > 0 {
		fmt.Fprintf(&b, "\n- and %d more invalid calls (%s)\n", len(invalid)-retryNoteCalls, strings.Join(more, ", "))
	}
	b.WriteString("\nReply again, with arguments that match the schemas. All tools are still available.")

	tools := j.tools
	if j.mode == ModeDeferred {
		tools = slices.Clone(j.tools)
		for i, t := range tools {
			if ft, ok := failing[t.Name]; ok && len(parameters(ft)) <= maxQuotedSchema {
				full := fullTool(ft)
				if len(full.Description) > maxQuotedSchema {
					// A server's description of megabytes made a retry
					// request as large: it keeps the one line it had.
					full.Description = t.Description
				}
				tools[i] = full
			}
		}
	}
	return tools, b.String()
}

// retryNoteCalls bounds the invalid calls the schema retry's note lists.
const retryNoteCalls = 50

// maxQuotedSchema bounds an input schema the schema retry gives in full
// (in its note, and in deferred mode's tools array): a server's schema of
// megabytes made a retry request no provider accepts, failing the job,
// while the largest of 1,044 real tools in the shared catalogs is 12 KB.
const maxQuotedSchema = 32 << 10

// argumentsHead is a call's arguments as the retry note quotes them: at
// most their first 500 bytes, then how long they were.
func argumentsHead(args string) string {
	const n = 500
	if len(args) <= n {
		return args
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(args[cut]) {
		cut--
	}
	return args[:cut] + fmt.Sprintf("... (%d bytes)", len(args))
}

// execute runs a round's calls concurrently (at most MaxParallelCalls at a
// time, started in call order) and returns their tool messages and records in call order.
// Each call's tool.call event is published in call order as it starts; its
// tool.result when it finishes.
func (j *job) execute(ctx context.Context, round int, calls []*call) ([]llm.Message, []reflect.Record) {
	// Calls start in order: the first MaxParallelCalls at once (their
	// intents went with the round's answer, see turn), each later one
	// when a slot frees.
	sem := make(chan struct{}, j.l.cfg.MaxParallelCalls)
	var wg sync.WaitGroup
	for _, c := range calls {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			c.output, c.isError = "Error: "+ctx.Err().Error(), true
			continue
		}
		c.round = round
		emit := j.announce(ctx, round, c) // here, not in the goroutine: in call order
		wg.Go(func() {
			defer func() { <-sem }()
			defer j.recoverCall(c) // a panic fails this call only (panics.go)
			j.run1(ctx, round, c, emit)
		})
	}
	wg.Wait()
	msgs := make([]llm.Message, len(calls))
	var recs []reflect.Record
	for i, c := range calls {
		msgs[i] = llm.Message{Role: llm.RoleTool, Content: c.forModel, ToolCallID: c.tc.ID, Name: c.tc.Function.Name}
		if c.record != nil {
			recs = append(recs, *c.record)
		}
		recs = append(recs, c.records...) // execute_code's inner calls
	}
	return msgs, recs
}

// systemPrompt is the one system-prompt rule: the model gets one system
// prompt. A job's own prompt replaces the leading system messages of its
// history (a continuation's transcript starts with the earlier job's
// prompt); a history that has one keeps it; the default applies only when
// neither the job nor its history has one.
func systemPrompt(job, def string, history []llm.Message) (string, []llm.Message) {
	hasOwn := len(history) > 0 && history[0].Role == llm.RoleSystem
	switch {
	case job != "":
		for len(history) > 0 && history[0].Role == llm.RoleSystem {
			history = history[1:] // the earlier job's prompt, superseded
		}
		return job, history
	case hasOwn:
		return "", history
	default:
		return def, history
	}
}
