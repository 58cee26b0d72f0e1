// Package telemetry measures the agent work of jobs for operators: the
// model requests, tokens, tool calls and validation retries of every job
// (Prometheus metrics read from the job's own events, so the figures are
// what the events say happened), and the MCP servers' sessions.
//
// It wraps a jobs.Runner: the queue mechanics keep their own metrics
// (jobs.Metrics: attempts, durations, queue wait, in flight, dead letters).
package telemetry

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// Server labels of tools that no MCP server answers.
const (
	ServerBuiltin = "jetagent" // the loop's meta tools and resource bridge
	ServerClient  = "client"   // a job's client tools, answered by its submitter
	// ServerUnknown is the server of a tool name that is neither the
	// loop's, nor in the catalog, nor declared by the job: the model made
	// it up (its call failed without reaching anyone). Its tool label is
	// OtherLabel.
	ServerUnknown = "unknown"
)

// Label values taken from jobs rather than from the worker's configuration
// (the models jobs name, the client tools they declare) are bounded: each
// value is a series the registry keeps for the life of the process, so a
// worker's memory and every scrape grew with each new name submitters
// sent. Past MaxJobLabelValues distinct values of a label, or for a value
// longer than MaxJobLabelBytes, the value is OtherLabel; so is a tool name
// that is neither in the catalog nor declared by the job (the model made
// it up).
const (
	MaxJobLabelValues = 100
	MaxJobLabelBytes  = 128
	OtherLabel        = "other"
)

// labelCap admits the first MaxJobLabelValues distinct values of a label.
type labelCap struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

func (c *labelCap) value(v string) string {
	if len(v) > MaxJobLabelBytes {
		return OtherLabel
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.seen[v]; ok {
		return v
	}
	if len(c.seen) >= MaxJobLabelValues {
		return OtherLabel
	}
	if c.seen == nil {
		c.seen = map[string]struct{}{}
	}
	c.seen[v] = struct{}{}
	return v
}

// Options configure Metrics.
type Options struct {
	// DefaultModel labels the requests of jobs that name no model.
	DefaultModel string
	// Pool, when set, names the server of each MCP tool, and its sessions
	// are reported (up, connects, reconnects per server).
	Pool *toolcache.Pool
}

// Metrics are the agent-level collectors. Use Runner to measure jobs.
type Metrics struct {
	opts          Options
	modelRequests *prometheus.CounterVec
	modelSeconds  *prometheus.HistogramVec
	tokens        *prometheus.CounterVec
	toolCalls     *prometheus.CounterVec
	toolSeconds   *prometheus.HistogramVec
	validation    *prometheus.CounterVec
	// models and clientTools bound the label values jobs name.
	models, clientTools labelCap
}

// NewMetrics registers the collectors with reg.
func NewMetrics(reg prometheus.Registerer, opts Options) (*Metrics, error) {
	m := &Metrics{
		opts: opts,
		modelRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jetagent_model_requests_total",
			Help: "Model requests of the agent loop (after the client's own retries), by model and outcome (ok, error).",
		}, []string{"model", "outcome"}),
		modelSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jetagent_model_request_duration_seconds",
			Help:    "Latency of model requests, by model and outcome (ok; error: until the loop ended on the request, e.g. a provider error or a timeout).",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16), // 10ms .. ~5min
		}, []string{"model", "outcome"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jetagent_model_tokens_total",
			Help: "Tokens by model and kind: prompt, completion, tool_definition (the tools arrays sent), " +
				"saved (tool-definition tokens full mode would have sent beyond what was sent).",
		}, []string{"model", "kind"}),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jetagent_tool_calls_total",
			Help: "Tool calls by server, tool and outcome (ok, error). Server jetagent: the loop's own tools; client: the job's client tools; unknown: names the model made up (tool other).",
		}, []string{"server", "tool", "outcome"}),
		toolSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "jetagent_tool_call_duration_seconds", Help: "Latency of tool calls, by server and tool.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 20), // 1ms .. ~9min
		}, []string{"server", "tool"}),
		validation: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jetagent_tool_validation_total",
			Help: "Tool-call validation: failed (arguments invalid against the schema), retry (an ephemeral schema retry sent).",
		}, []string{"kind"}),
	}
	cs := []prometheus.Collector{m.modelRequests, m.modelSeconds, m.tokens, m.toolCalls, m.toolSeconds, m.validation}
	if opts.Pool != nil {
		cs = append(cs, poolCollector{opts.Pool})
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("telemetry: %w", err)
		}
	}
	return m, nil
}

// Runner wraps r so the events of every job it runs are measured.
func (m *Metrics) Runner(r jobs.Runner) jobs.Runner {
	return jobs.RunnerFunc(func(ctx context.Context, job *jobs.Job, env jobs.RunEnv) (*jobs.Outcome, error) {
		model := job.Model
		switch model {
		case "", m.opts.DefaultModel:
			model = m.opts.DefaultModel
		default:
			model = m.models.value(model)
		}
		declared := make(map[string]bool, len(job.ClientTools))
		for _, d := range job.ClientTools {
			declared[d.Name] = true
		}
		return r.Run(ctx, job, &observedEnv{RunEnv: env, m: m, model: model, declared: declared, asked: map[[2]int]time.Time{}})
	})
}

// observedEnv measures a job's events on their way out.
type observedEnv struct {
	jobs.RunEnv
	m     *Metrics
	model string
	// declared are the job's client tools.
	declared map[string]bool

	mu    sync.Mutex
	asked map[[2]int]time.Time // model requests sent, by round and retry, not answered yet
}

func (e *observedEnv) Emit(ctx context.Context, typ string, round int, data any) error {
	if d, ok := data.(map[string]any); ok {
		e.observe(typ, round, d)
	}
	return e.RunEnv.Emit(ctx, typ, round, data)
}

func (e *observedEnv) observe(typ string, round int, d map[string]any) {
	m := e.m
	switch typ {
	case agentloop.EventLLMRequest:
		e.mu.Lock()
		e.asked[[2]int{round, num(d["retry"])}] = time.Now()
		e.mu.Unlock()
		m.tokens.WithLabelValues(e.model, "tool_definition").Add(float64(num(d["tool_def_tokens"])))
	case agentloop.EventLLMResponse:
		key := [2]int{round, num(d["retry"])}
		e.mu.Lock()
		t0, ok := e.asked[key]
		delete(e.asked, key)
		e.mu.Unlock()
		m.modelRequests.WithLabelValues(e.model, "ok").Inc()
		if ok {
			m.modelSeconds.WithLabelValues(e.model, "ok").Observe(time.Since(t0).Seconds())
		}
		m.tokens.WithLabelValues(e.model, "prompt").Add(float64(num(d["prompt_tokens"])))
		m.tokens.WithLabelValues(e.model, "completion").Add(float64(num(d["completion_tokens"])))
	case agentloop.EventToolSchemaRetry:
		m.validation.WithLabelValues("retry").Inc() // its tokens are counted by the llm.request that follows
	case agentloop.EventToolValidationFailed:
		m.validation.WithLabelValues("failed").Inc()
	case agentloop.EventToolResult:
		tool, _ := d["tool"].(string)
		if tool == "" {
			tool, _ = d["name"].(string)
		}
		server := serverOf(e.m.opts.Pool, tool, e.declared)
		switch server {
		case ServerClient:
			tool = m.clientTools.value(tool)
		case ServerUnknown:
			tool = OtherLabel
		}
		outcome := "ok"
		if failed, _ := d["error"].(bool); failed {
			outcome = "error"
		}
		m.toolCalls.WithLabelValues(server, tool, outcome).Inc()
		m.toolSeconds.WithLabelValues(server, tool).Observe(float64(num(d["duration_ms"])) / 1000)
	case agentloop.EventLoopOutcome:
		// Requests sent and never answered failed (the loop ended on them):
		// their latency is until then, so a provider that fails slowly or
		// a request cut by the job's timeout shows in the histogram.
		e.mu.Lock()
		failed := len(e.asked)
		for _, t0 := range e.asked {
			m.modelSeconds.WithLabelValues(e.model, "error").Observe(time.Since(t0).Seconds())
		}
		clear(e.asked)
		e.mu.Unlock()
		if failed > 0 {
			m.modelRequests.WithLabelValues(e.model, "error").Add(float64(failed))
		}
		if saved := num(d["full_mode_tool_def_tokens"]) - num(d["tool_def_tokens"]); saved > 0 {
			m.tokens.WithLabelValues(e.model, "saved").Add(float64(saved))
		}
	}
}

// serverOf names the server of a tool by its model-facing name (pool may
// be nil: no MCP servers); declared are the job's client tools.
func serverOf(p *toolcache.Pool, tool string, declared map[string]bool) string {
	if slices.Contains(agentloop.BuiltinTools(), tool) {
		return ServerBuiltin
	}
	if p != nil {
		if t, ok := p.Registry().Get(tool); ok {
			return t.Server
		}
	}
	if declared[tool] {
		return ServerClient
	}
	return ServerUnknown
}

// num reads an event's number (an int from the loop, a float64 after JSON).
func num(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case int64:
		return int(x)
	case float64:
		return int(x)
	}
	return 0
}

// poolCollector reports the MCP servers' sessions at each scrape.
type poolCollector struct{ p *toolcache.Pool }

var (
	serverUpDesc = prometheus.NewDesc("jetagent_mcp_server_up",
		"1 when the MCP server's shared session is ready, 0 otherwise (connecting, reconnecting, failed).", []string{"server", "state"}, nil)
	connectsDesc = prometheus.NewDesc("jetagent_mcp_connects_total",
		"Successful connections to the MCP server (the first and every reconnection).", []string{"server"}, nil)
	reconnectsDesc = prometheus.NewDesc("jetagent_mcp_reconnects_total",
		"Reconnections to the MCP server after its session was lost or replaced.", []string{"server"}, nil)
)

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- serverUpDesc
	ch <- connectsDesc
	ch <- reconnectsDesc
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.p.Status() {
		if st.State == toolcache.StateDisabled {
			continue
		}
		up := 0.0
		if st.State == toolcache.StateReady {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(serverUpDesc, prometheus.GaugeValue, up, st.Name, st.State)
		ch <- prometheus.MustNewConstMetric(connectsDesc, prometheus.CounterValue, float64(st.Connects), st.Name)
		ch <- prometheus.MustNewConstMetric(reconnectsDesc, prometheus.CounterValue, float64(max(st.Connects-1, 0)), st.Name)
	}
}

// Ready reports whether every enabled MCP server of pool is ready; the
// error names those that are not. A nil pool (no servers) is ready.
func Ready(pool *toolcache.Pool) error {
	if pool == nil {
		return nil
	}
	var down []string
	for _, st := range pool.Status() {
		if st.State != toolcache.StateReady && st.State != toolcache.StateDisabled {
			down = append(down, st.Name+" "+st.State)
		}
	}
	if len(down) > 0 {
		return fmt.Errorf("MCP servers not ready: %v", down)
	}
	return nil
}
