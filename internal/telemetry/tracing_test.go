package telemetry_test

import (
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/agentrun"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/jobs/jobstest"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
	"github.com/jetagent/jetagent/internal/telemetry"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// span is one span as the receiver decoded it, with its resource's
// service.name.
type span struct {
	*tracepb.Span
	service string
}

func (s span) attr(key string) *commonpb.AnyValue {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

func (s span) str(key string) string { return s.attr(key).GetStringValue() }
func (s span) int(key string) int64  { return s.attr(key).GetIntValue() }

// receiver is an in-process OTLP/HTTP trace receiver: POST /v1/traces with
// a protobuf ExportTraceServiceRequest.
type receiver struct {
	srv *httptest.Server

	mu     sync.Mutex
	spans  []span
	notify chan struct{} // signalled (without blocking) on every export
}

func startReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{notify: make(chan struct{}, 1)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		body, err := io.ReadAll(req.Body)
		var ex coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &ex)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range ex.ResourceSpans {
			var service string
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					r.spans = append(r.spans, span{s, service})
				}
			}
		}
		r.mu.Unlock()
		select {
		case r.notify <- struct{}{}:
		default:
		}
		b, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(b)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// wait returns the spans for which match holds once there are n of them,
// failing the test after a timeout.
func (r *receiver) wait(t *testing.T, n int, match func(span) bool) []span {
	t.Helper()
	timeout := time.After(natstest.WaitTimeout)
	for {
		r.mu.Lock()
		var got []span
		for _, s := range r.spans {
			if match(s) {
				got = append(got, s)
			}
		}
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-r.notify:
		case <-timeout:
			t.Fatalf("%d spans arrived, want %d: %v", len(got), n, got)
		}
	}
}

func inTrace(id []byte) func(span) bool {
	return func(s span) bool { return string(s.TraceId) == string(id) }
}

// tracedWorker runs agentrun's Runner, traced, on an embedded NATS with
// the scripted model and an in-process MCP server whose tool "lookup"
// answers and "broken" fails.
func tracedWorker(t *testing.T, tp trace.TracerProvider) (*jobs.Client, *nats.Conn) {
	t.Helper()
	model := llmtest.NewServer(t)
	// Each job asks for its tools (named in its task) once, then answers.
	model.Handle(func(req llmtest.RecordedRequest) llmtest.Reply {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == "tool" {
			return llmtest.Reply{Content: "done", Usage: &llm.Usage{PromptTokens: 40, CompletionTokens: 2}}
		}
		return llmtest.Reply{
			ToolCalls: []llm.ToolCall{
				{ID: "call-lookup", Function: llm.FunctionCall{Name: "lookup", Arguments: `{"q":"x"}`}},
				{ID: "call-broken", Function: llm.FunctionCall{Name: "broken", Arguments: `{}`}},
			},
			Usage: &llm.Usage{PromptTokens: 30, CompletionTokens: 5},
		}
	})
	c, err := llm.New(llm.Config{BaseURL: model.URL(), Model: "scripted", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	loop, err := agentloop.New(agentloop.Config{LLM: c})
	if err != nil {
		t.Fatal(err)
	}
	s := server.NewMCPServer("traced", "1.0.0", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("lookup", mcp.WithDescription("Look up q."), mcp.WithString("q")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("found"), nil
		})
	s.AddTool(mcp.NewTool("broken", mcp.WithDescription("Always fails.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("it broke"), nil
		})
	ctx, cancel := context.WithTimeout(t.Context(), natstest.WaitTimeout)
	defer cancel()
	pool, err := toolcache.NewPool(ctx, toolcache.Config{},
		toolcache.WithInProcessServer("traced", s, toolcache.ServerConfig{}),
		toolcache.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pool.Close(); err != nil {
			t.Errorf("pool close: %v", err)
		}
	})
	runner, err := agentrun.New(agentrun.Config{Loop: loop, Pool: pool, Model: "the-model"})
	if err != nil {
		t.Fatal(err)
	}
	tracing := telemetry.NewTracing(tp, telemetry.Options{DefaultModel: "the-model", Pool: pool})

	ns := natstest.Start(t)
	nc := natstest.Connect(t, ns)
	jobstest.RunWorker(t, jobs.Config{
		Conn: nc, Runner: tracing.Runner(runner), Admit: agentrun.Admit, FetchWait: 200 * time.Millisecond,
	})
	client, err := jobs.NewClient(natstest.Context(t), nc, jobs.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return client, nc
}

// TestJobTraces: a job run through NATS is exported to an OTLP receiver
// as one job span with its model requests and tool calls as children,
// carrying the GenAI attributes; a trace context in the job message's
// headers (put there by Client.Submit, or by any publisher) parents the
// job span.
func TestJobTraces(t *testing.T) {
	t.Parallel()
	rcv := startReceiver(t)
	tp, err := telemetry.NewTracerProvider(t.Context(), "jetagent-test",
		otlptracehttp.WithEndpointURL(rcv.srv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Errorf("tracer provider shutdown: %v", err)
		}
	})
	client, nc := tracedWorker(t, tp)

	parentOf := func(tid, sid byte) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: trace.TraceID{tid, 1, 2, 3}, SpanID: trace.SpanID{sid, 1}, TraceFlags: trace.FlagsSampled, Remote: true,
		})
	}
	tests := []struct {
		name   string
		parent trace.SpanContext // invalid: no parent
		// publish sends the job; by default through Client.Submit with the
		// parent in ctx.
		publish func(t *testing.T, ctx context.Context, id string, parent trace.SpanContext)
	}{
		{name: "no parent"},
		{name: "submitter span", parent: parentOf(0xa1, 0xb1)},
		{name: "traceparent published by hand", parent: parentOf(0xa2, 0xb2),
			publish: func(t *testing.T, ctx context.Context, id string, parent trace.SpanContext) {
				// What `nats pub -H Traceparent:...` sends: another case, no
				// Client. nats.Header keys are case-sensitive.
				m := nats.NewMsg(client.Names().JobsSubject(jobs.DefaultQueue))
				m.Data = []byte(`{"id":"` + id + `","task":"use lookup and broken"}`)
				m.Header.Set("Traceparent", "00-"+parent.TraceID().String()+"-"+parent.SpanID().String()+"-01")
				if _, err := jetstreamPublish(ctx, nc, m); err != nil {
					t.Fatal(err)
				}
			}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := natstest.Context(t)
			id := "traced-" + string(rune('a'+i))
			if tt.publish != nil {
				tt.publish(t, ctx, id, tt.parent)
			} else {
				sctx := ctx
				if tt.parent.IsValid() {
					sctx = trace.ContextWithSpanContext(ctx, tt.parent)
				}
				if _, err := client.Submit(sctx, &jobs.Job{ID: id, Task: "use lookup and broken"}); err != nil {
					t.Fatal(err)
				}
			}
			st, err := client.Wait(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != jobs.StatusSucceeded {
				t.Fatalf("job %s: %+v", id, st)
			}
			if err := tp.ForceFlush(ctx); err != nil {
				t.Fatal(err)
			}
			isJob := func(s span) bool { return s.str(string(telemetry.AttrJobID)) == id }
			jobSpan := rcv.wait(t, 1, isJob)[0]
			if jobSpan.Name != "job "+jobs.DefaultQueue || jobSpan.Kind != tracepb.Span_SPAN_KIND_CONSUMER ||
				jobSpan.service != "jetagent-test" ||
				jobSpan.int(string(telemetry.AttrJobAttempt)) != 1 ||
				jobSpan.str(string(telemetry.AttrJobQueue)) != jobs.DefaultQueue ||
				jobSpan.str(string(telemetry.AttrJobStatus)) != telemetry.StatusSucceeded ||
				jobSpan.str("gen_ai.operation.name") != "invoke_agent" ||
				jobSpan.int("gen_ai.usage.input_tokens") != 70 || jobSpan.int("gen_ai.usage.output_tokens") != 7 {
				t.Errorf("job span %v", jobSpan)
			}
			if tt.parent.IsValid() {
				if hex.EncodeToString(jobSpan.TraceId) != tt.parent.TraceID().String() ||
					hex.EncodeToString(jobSpan.ParentSpanId) != tt.parent.SpanID().String() {
					t.Errorf("job span in trace %x under %x, want trace %s under %s",
						jobSpan.TraceId, jobSpan.ParentSpanId, tt.parent.TraceID(), tt.parent.SpanID())
				}
			} else if len(jobSpan.ParentSpanId) != 0 {
				t.Errorf("job span has parent %x, want a root span", jobSpan.ParentSpanId)
			}

			// Two model requests and two tool calls, children of the job span.
			all := rcv.wait(t, 5, inTrace(jobSpan.TraceId))
			byName := map[string]span{}
			for _, s := range all {
				if string(s.SpanId) == string(jobSpan.SpanId) {
					continue
				}
				if string(s.ParentSpanId) != string(jobSpan.SpanId) {
					t.Errorf("span %q has parent %x, want the job span %x", s.Name, s.ParentSpanId, jobSpan.SpanId)
				}
				byName[s.Name] = s
			}
			var chats []span
			for _, s := range all {
				if s.Name == "chat the-model" {
					chats = append(chats, s)
				}
			}
			if len(all) != 5 || len(chats) != 2 {
				t.Fatalf("spans of the trace: %v", all)
			}
			tokens := map[int64]int64{}
			for _, c := range chats {
				if c.Kind != tracepb.Span_SPAN_KIND_CLIENT || c.str("gen_ai.operation.name") != "chat" ||
					c.str("gen_ai.request.model") != "the-model" || c.str("gen_ai.provider.name") != "openai" ||
					c.str("gen_ai.system") != "openai" || c.Status.GetCode() != tracepb.Status_STATUS_CODE_OK ||
					c.StartTimeUnixNano == 0 || c.EndTimeUnixNano < c.StartTimeUnixNano {
					t.Errorf("chat span %v", c)
				}
				tokens[c.int("gen_ai.usage.input_tokens")] = c.int("gen_ai.usage.output_tokens")
			}
			if tokens[30] != 5 || tokens[40] != 2 {
				t.Errorf("chat spans' tokens (input: output) %v, want 30: 5 and 40: 2", tokens)
			}
			for _, c := range []struct {
				name, callID string
				code         tracepb.Status_StatusCode
			}{
				{"lookup", "call-lookup", tracepb.Status_STATUS_CODE_OK},
				{"broken", "call-broken", tracepb.Status_STATUS_CODE_ERROR},
			} {
				s, ok := byName["execute_tool "+c.name]
				if !ok {
					t.Errorf("no execute_tool %s span among %v", c.name, all)
					continue
				}
				if s.str("gen_ai.operation.name") != "execute_tool" || s.str("gen_ai.tool.name") != c.name ||
					s.str("gen_ai.tool.call.id") != c.callID || s.str("jetagent.tool.server") != "traced" ||
					s.Status.GetCode() != c.code {
					t.Errorf("tool span %v", s)
				}
			}
		})
	}
}

// jetstreamPublish publishes m to JetStream as a plain client would (a
// request whose reply is the stream's ack).
func jetstreamPublish(ctx context.Context, nc *nats.Conn, m *nats.Msg) (*nats.Msg, error) {
	return nc.RequestMsgWithContext(ctx, m)
}

func TestTracingEnabled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"nothing set", nil, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{"blank endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, false},
		{"only a service name", map[string]string{"OTEL_SERVICE_NAME": "w"}, false},
		{"sdk disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
		{"exporter otlp", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "otlp"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := telemetry.TracingEnabled(func(k string) string { return tt.env[k] }); got != tt.want {
				t.Errorf("TracingEnabled(%v) = %v, want %v", tt.env, got, tt.want)
			}
		})
	}
}

// TestStartTracingFromEnv: the standard variables switch the exporter on
// (the SDK reads the endpoint and service name itself) and, unset, leave a
// provider that records nothing. Not parallel: it sets the environment.
func TestStartTracingFromEnv(t *testing.T) {
	rcv := startReceiver(t)
	for _, tt := range []struct {
		name     string
		endpoint string
	}{
		{"unset", ""},
		{"set", rcv.srv.URL},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", tt.endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
			t.Setenv("OTEL_SERVICE_NAME", "from-env")
			ctx := natstest.Context(t)
			tp, shutdown, err := telemetry.StartTracing(ctx, "jetagent-worker", os.Getenv)
			if err != nil {
				t.Fatal(err)
			}
			_, s := tp.Tracer("test").Start(ctx, "probe-"+tt.name)
			recording := s.IsRecording()
			s.End()
			if err := shutdown(ctx); err != nil { // flushes
				t.Fatal(err)
			}
			if recording != (tt.endpoint != "") {
				t.Fatalf("span recording = %v with OTEL_EXPORTER_OTLP_ENDPOINT=%q", recording, tt.endpoint)
			}
			if tt.endpoint == "" {
				return
			}
			got := rcv.wait(t, 1, func(s span) bool { return s.Name == "probe-set" })
			if got[0].service != "from-env" {
				t.Errorf("service.name %q, want OTEL_SERVICE_NAME's", got[0].service)
			}
		})
	}
}
