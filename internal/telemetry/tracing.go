package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/redact"
)

// Traces: one span per job attempt, with a child per model request and per
// tool call, named and attributed after the OpenTelemetry GenAI semantic
// conventions.
//
// The child spans are built from the job's events, as the metrics are, not
// by instrumenting the loop: the loop already emits an event right before
// and right after each model request (llm.request, llm.response) and each
// tool call (tool.call, tool.result), carrying what the conventions ask for
// (tokens, finish reason, tool and call id, error). Reading them here keeps
// agentloop, llm and toolcache free of tracing, and the spans agree with
// what `submit watch` shows. A span starts when its opening event is
// emitted and ends at its closing event, so its times are the events'.

// Attribute keys (GenAI semantic conventions, plus jetagent's own).
const (
	attrOperation     = attribute.Key("gen_ai.operation.name")
	attrProvider      = attribute.Key("gen_ai.provider.name")
	attrSystem        = attribute.Key("gen_ai.system") // the older name of gen_ai.provider.name, for older backends
	attrRequestModel  = attribute.Key("gen_ai.request.model")
	attrInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	attrOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
	attrCachedTokens  = attribute.Key("gen_ai.usage.cache_read.input_tokens")
	attrFinishReasons = attribute.Key("gen_ai.response.finish_reasons")
	attrToolName      = attribute.Key("gen_ai.tool.name")
	attrToolCallID    = attribute.Key("gen_ai.tool.call.id")
	attrToolType      = attribute.Key("gen_ai.tool.type")
	attrErrorType     = attribute.Key("error.type")

	AttrJobID       = attribute.Key("jetagent.job.id")
	AttrJobAttempt  = attribute.Key("jetagent.job.attempt")
	AttrJobQueue    = attribute.Key("jetagent.job.queue")
	AttrJobStatus   = attribute.Key("jetagent.job.status")
	AttrWorker      = attribute.Key("jetagent.worker.id")
	attrStopReason  = attribute.Key("jetagent.job.stop_reason")
	attrRound       = attribute.Key("jetagent.round")
	attrRetry       = attribute.Key("jetagent.retry")
	attrToolServer  = attribute.Key("jetagent.tool.server")
	attrModelCalled = attribute.Key("jetagent.tool.called_as") // the model-facing name (call_tool) of an indirect call
	attrToolDefToks = attribute.Key("jetagent.tool_def_tokens")
	// The job's tokens over all its attempts (the job span's gen_ai.usage
	// are its attempt's: a resumed attempt does not send again what an
	// earlier one did).
	attrJobInputTokens  = attribute.Key("jetagent.job.input_tokens")
	attrJobOutputTokens = attribute.Key("jetagent.job.output_tokens")
)

// Provider is gen_ai.provider.name of the model requests: the worker
// speaks the OpenAI chat-completions API (internal/llm, openai-go).
const Provider = "openai"

// Job span status values (AttrJobStatus): how the attempt's runner ended.
// The worker decides what the job's state becomes (a cancelled or timed
// out attempt is "interrupted" here).
const (
	StatusSucceeded   = "succeeded"
	StatusFailed      = "failed"
	StatusRetry       = "retry"       // a retryable error: the worker may hand the job back
	StatusInterrupted = "interrupted" // cancelled, timed out or handed back at shutdown
)

// TracingEnabled reports whether traces are to be exported, from the
// standard variables read through getenv (os.Getenv): only when
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set,
// and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none says
// otherwise. Everything else (headers, protocol details, service name,
// sampler) the SDK reads from the environment itself.
func TracingEnabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") ||
		strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		return false
	}
	return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) != "" ||
		strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) != ""
}

// CheckTracingEnv reports what in the standard variables read through
// getenv the OTLP/HTTP exporter cannot use, which the SDK would otherwise
// replace silently, so that spans went elsewhere or nowhere with only a
// warning at each export: an endpoint that is not an http:// or https://
// URL with a host (OTEL_EXPORTER_OTLP_ENDPOINT=collector:4318 sent to
// https://localhost:4318, ftp://host to https://host), or a protocol other
// than http/protobuf (grpc, http/json: the exporter speaks only OTLP/HTTP
// with protobuf), or headers (OTEL_EXPORTER_OTLP_HEADERS,
// OTEL_EXPORTER_OTLP_TRACES_HEADERS) it would drop, logging their values.
// The traces-specific endpoint and protocol are checked when set, as the
// SDK reads them first.
func CheckTracingEnv(getenv func(string) string) error {
	pick := func(names ...string) (string, string) {
		for _, n := range names {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return n, v
			}
		}
		return "", ""
	}
	if name, v := pick("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"); name != "" {
		u, err := url.Parse(v)
		if err != nil || (!strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https")) || u.Host == "" {
			return fmt.Errorf("telemetry: %s=%q: want an http:// or https:// URL with a host, e.g. http://collector:4318 (OTLP/HTTP)",
				name, redact.URL(v))
		}
	}
	if name, v := pick("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"); name != "" && v != "http/protobuf" {
		return fmt.Errorf("telemetry: %s=%q: only http/protobuf is supported (OTLP/HTTP, usually port 4318; not OTLP/gRPC)", name, v)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		if v := getenv(name); strings.TrimSpace(v) != "" {
			if err := checkHeaders(v); err != nil {
				return fmt.Errorf("telemetry: %s: %w (want key=value pairs separated by commas, "+
					"e.g. Authorization=Bearer%%20TOKEN; the value is not shown)", name, err)
			}
		}
	}
	return nil
}

// checkHeaders checks an OTEL_EXPORTER_OTLP_HEADERS value as the exporter
// reads it (comma-separated key=value, a token key, a percent-decodable
// value). The exporter drops an entry it cannot read, logging it whole
// through the SDK's logger: "Authorization: Bearer <token>" (a colon for
// the '=') put the token on stderr and sent the spans without it. The
// error never quotes a value; it names the entry and, when it reads as
// one, its key.
func checkHeaders(v string) error {
	for i, entry := range strings.Split(v, ",") {
		n, val, found := strings.Cut(entry, "=")
		key := strings.TrimSpace(n)
		switch {
		case strings.TrimSpace(entry) == "":
			return fmt.Errorf("entry %d is empty (a stray comma?)", i+1)
		case !found:
			// "Authorization: Bearer x": the name before the ':' is
			// shown, never what follows (a bare entry may be the token).
			if word, _, colon := strings.Cut(strings.TrimSpace(entry), ":"); colon && validHeaderKey(word) && len(word) <= 64 {
				return fmt.Errorf("entry %d (%s) has no '=' (a ':' instead?)", i+1, word)
			}
			return fmt.Errorf("entry %d has no '='", i+1)
		case !validHeaderKey(key):
			return fmt.Errorf("entry %d: %q is not a header name", i+1, key)
		}
		if _, err := url.PathUnescape(val); err != nil {
			return fmt.Errorf("entry %d (%s): the value has a '%%' that is not a percent escape (write %%25 for a literal %%)", i+1, key)
		}
	}
	return nil
}

// validHeaderKey is the exporter's check of a header name: RFC 7230
// token characters.
func validHeaderKey(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)
		if !ok {
			return false
		}
	}
	return true
}

// StartTracing returns the process's tracer provider: an OTLP/HTTP exporter
// configured by the standard OTEL_* variables when TracingEnabled(getenv),
// else a no-op provider (no exporter, nothing recorded). service is the
// default service.name (OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win).
// Variables the exporter cannot use are an error (CheckTracingEnv).
// Call shutdown on exit: it flushes the spans not yet exported.
func StartTracing(ctx context.Context, service string, getenv func(string) string) (
	tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	if !TracingEnabled(getenv) {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	if err := CheckTracingEnv(getenv); err != nil {
		return nil, nil, err
	}
	sdk, err := NewTracerProvider(ctx, service)
	if err != nil {
		return nil, nil, err
	}
	return sdk, sdk.Shutdown, nil
}

// NewTracerProvider builds an SDK tracer provider exporting over OTLP/HTTP
// in batches. opts override what the exporter reads from the environment
// (tests give the endpoint of an in-process receiver).
func NewTracerProvider(ctx context.Context, service string, opts ...otlptracehttp.Option) (*sdktrace.TracerProvider, error) {
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
	)
	if err != nil && res == nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("telemetry: trace resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// Span names and attribute values taken from jobs and from the model are
// bounded, as the metrics' labels are: a span name is what trace backends
// group by (their operation lists, the span metrics a collector derives
// from spans, one series per name), and a model makes up tool names and
// call ids of any length. A tool span is named "execute_tool other"
// (OtherLabel) for a tool that is neither one of the loop's own, nor in
// the catalog, nor declared by the job, or past MaxJobLabelValues declared
// names or MaxJobLabelBytes; a model request "chat other" for a job's
// model past those bounds (see Metrics). The attributes keep the names as
// they came, cut to MaxSpanAttrBytes.
const MaxSpanAttrBytes = 256

// cutAttr cuts s to at most MaxSpanAttrBytes (on a character boundary),
// saying how long it was.
func cutAttr(s string) string {
	if len(s) <= MaxSpanAttrBytes {
		return s
	}
	n := MaxSpanAttrBytes - 24
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:n], len(s))
}

// Tracing makes the spans of the jobs a runner runs. Use Runner.
type Tracing struct {
	tracer trace.Tracer
	opts   Options
	// models and clientTools bound the names in span names (as Metrics'
	// labels).
	models, clientTools labelCap
}

// TracerName is the instrumentation scope of jetagent's spans.
const TracerName = "github.com/jetagent/jetagent"

// NewTracing traces jobs with tp; opts name the default model and, with a
// Pool, the server of each tool (jetagent.tool.server). A nil tp traces
// nothing.
func NewTracing(tp trace.TracerProvider, opts Options) *Tracing {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return &Tracing{tracer: tp.Tracer(TracerName), opts: opts}
}

// toolSpanName is the bounded name of a tool in its span's name: the
// loop's own tools and the catalog's as they are, a job's declared client
// tools within the bounds, anything else OtherLabel.
func (t *Tracing) toolSpanName(tool string, declared map[string]bool) string {
	switch {
	case slices.Contains(agentloop.BuiltinTools(), tool):
		return tool
	case t.opts.Pool != nil:
		if _, ok := t.opts.Pool.Registry().Get(tool); ok {
			return tool
		}
	}
	if declared[tool] {
		return t.clientTools.value(tool)
	}
	return OtherLabel
}

// Runner wraps r so each attempt it runs is a span ("job <queue>", kind
// consumer), the child of the trace context in the job message's headers
// (jobs.MessageHeader: a submitter's span) when there is one, with the
// attempt's model requests and tool calls as its children (the tool calls
// an execute_code run makes are the children of its span).
func (t *Tracing) Runner(r jobs.Runner) jobs.Runner {
	return jobs.RunnerFunc(func(ctx context.Context, job *jobs.Job, env jobs.RunEnv) (*jobs.Outcome, error) {
		model := job.Model
		if model == "" {
			model = t.opts.DefaultModel
		}
		spanModel := model
		if model != t.opts.DefaultModel {
			spanModel = t.models.value(model)
		}
		model = cutAttr(model)
		declared := make(map[string]bool, len(job.ClientTools))
		for _, d := range job.ClientTools {
			declared[d.Name] = true
		}
		queue := job.Queue
		if queue == "" {
			queue = jobs.DefaultQueue
		}
		parent := propagation.TraceContext{}.Extract(ctx, jobs.HeaderCarrier(jobs.MessageHeader(ctx)))
		ctx, span := t.tracer.Start(parent, "job "+queue, trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(
				attrOperation.String("invoke_agent"),
				attrProvider.String(Provider),
				attrRequestModel.String(model),
				AttrJobID.String(job.ID),
				AttrJobAttempt.Int(env.Attempt()),
				AttrJobQueue.String(queue),
				AttrWorker.String(env.WorkerID()),
			))
		te := &tracedEnv{RunEnv: env, t: t, ctx: ctx, model: model, spanModel: spanModel, declared: declared,
			requests: map[[2]int]trace.Span{}, calls: map[string]trace.Span{}}
		out, err := r.Run(ctx, job, te)
		te.endOpen("the attempt ended first")
		status := StatusSucceeded
		switch {
		case err == nil:
			span.SetStatus(codes.Ok, "")
		case ctx.Err() != nil:
			status = StatusInterrupted
			span.SetStatus(codes.Error, context.Cause(ctx).Error())
		case jobs.IsRetryable(err):
			status = StatusRetry
			span.SetStatus(codes.Error, err.Error())
		default:
			status = StatusFailed
			span.SetStatus(codes.Error, err.Error())
		}
		if err != nil {
			span.RecordError(err)
		}
		te.mu.Lock()
		in, outTok := te.inputTokens, te.outputTokens
		te.mu.Unlock()
		span.SetAttributes(AttrJobStatus.String(status), attrInputTokens.Int64(in), attrOutputTokens.Int64(outTok))
		if out != nil {
			span.SetAttributes(
				attrStopReason.String(out.StopReason),
				attrJobInputTokens.Int64(out.Usage.PromptTokens),
				attrJobOutputTokens.Int64(out.Usage.CompletionTokens),
			)
		}
		span.End()
		return out, err
	})
}

// tracedEnv turns a job's events into spans on their way out.
type tracedEnv struct {
	jobs.RunEnv
	t     *Tracing
	ctx   context.Context // the job span's: the parent of every child span
	model string          // gen_ai.request.model (cut to MaxSpanAttrBytes)
	// spanModel is the model in span names (bounded).
	spanModel string
	// declared are the job's client tools.
	declared map[string]bool

	mu       sync.Mutex
	requests map[[2]int]trace.Span // open model requests by round and retry
	calls    map[string]trace.Span // open tool calls by call id
	// inputTokens and outputTokens are the attempt's, from its model
	// replies.
	inputTokens, outputTokens int64
}

func (e *tracedEnv) Emit(ctx context.Context, typ string, round int, data any) error {
	if d, ok := data.(map[string]any); ok {
		e.observe(typ, round, d)
	}
	return e.RunEnv.Emit(ctx, typ, round, data)
}

func (e *tracedEnv) observe(typ string, round int, d map[string]any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch typ {
	case agentloop.EventLLMRequest:
		key := [2]int{round, num(d["retry"])}
		if old := e.requests[key]; old != nil {
			endFailed(old, "superseded")
		}
		mode, _ := d["mode"].(string)
		_, span := e.t.tracer.Start(e.ctx, "chat "+e.spanModel, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(
				attrOperation.String("chat"),
				attrProvider.String(Provider),
				attrSystem.String(Provider),
				attrRequestModel.String(e.model),
				attrRound.Int(round),
				attrRetry.Int(key[1]),
				attrToolDefToks.Int(num(d["tool_def_tokens"])),
				attribute.String("jetagent.tool_mode", mode),
			))
		e.requests[key] = span
	case agentloop.EventLLMResponse:
		e.inputTokens += int64(num(d["prompt_tokens"]))
		e.outputTokens += int64(num(d["completion_tokens"]))
		key := [2]int{round, num(d["retry"])}
		span := e.requests[key]
		if span == nil {
			return
		}
		delete(e.requests, key)
		reason, _ := d["finish_reason"].(string)
		span.SetAttributes(
			attrInputTokens.Int(num(d["prompt_tokens"])),
			attrOutputTokens.Int(num(d["completion_tokens"])),
			attrCachedTokens.Int(num(d["cached_prompt_tokens"])),
			attrFinishReasons.StringSlice([]string{cutAttr(reason)}),
		)
		span.SetStatus(codes.Ok, "")
		span.End()
	case agentloop.EventToolCall:
		id, _ := d["call_id"].(string)
		name, _ := d["name"].(string)
		if old := e.calls[id]; old != nil {
			endFailed(old, "superseded")
		}
		// A call made by another (code mode's inner calls, made by the
		// execute_code call parent_call_id names) is its child.
		parent := e.ctx
		if pid, _ := d["parent_call_id"].(string); pid != "" && pid != id {
			if p := e.calls[pid]; p != nil {
				parent = trace.ContextWithSpan(e.ctx, p)
			}
		}
		_, span := e.t.tracer.Start(parent, "execute_tool "+e.t.toolSpanName(name, e.declared), trace.WithAttributes(
			attrOperation.String("execute_tool"),
			attrToolName.String(cutAttr(name)),
			attrToolCallID.String(cutAttr(id)),
			attrToolType.String("function"),
			attrRound.Int(round),
		))
		e.calls[id] = span
	case agentloop.EventToolResult:
		id, _ := d["call_id"].(string)
		span := e.calls[id]
		if span == nil {
			return
		}
		delete(e.calls, id)
		name, _ := d["name"].(string)
		tool, _ := d["tool"].(string)
		if tool != "" && tool != name {
			// An indirect call (call_tool): the span is the real tool's.
			span.SetName("execute_tool " + e.t.toolSpanName(tool, e.declared))
			span.SetAttributes(attrToolName.String(cutAttr(tool)), attrModelCalled.String(cutAttr(name)))
		} else {
			tool = name
		}
		span.SetAttributes(attrToolServer.String(serverOf(e.t.opts.Pool, tool, e.declared)))
		if failed, _ := d["error"].(bool); failed {
			span.SetAttributes(attrErrorType.String("tool_error"))
			span.SetStatus(codes.Error, "the tool returned an error")
		} else {
			span.SetStatus(codes.Ok, "")
		}
		span.End()
	case agentloop.EventLoopOutcome:
		why, _ := d["error"].(string)
		if why == "" {
			why = "no reply before the loop ended"
		}
		e.endOpenLocked(why)
	}
}

// endOpen ends the spans still open (a request the loop ended on, a call
// whose result never came) as failed.
func (e *tracedEnv) endOpen(why string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.endOpenLocked(why)
}

func (e *tracedEnv) endOpenLocked(why string) {
	for k, s := range e.requests {
		endFailed(s, why)
		delete(e.requests, k)
	}
	for k, s := range e.calls {
		endFailed(s, why)
		delete(e.calls, k)
	}
}

func endFailed(s trace.Span, why string) {
	s.SetAttributes(attrErrorType.String("incomplete"))
	s.SetStatus(codes.Error, why)
	s.End()
}
