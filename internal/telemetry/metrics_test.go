package telemetry_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/telemetry"
)

// sinkEnv is a RunEnv that only takes events.
type sinkEnv struct {
	jobs.RunEnv
	n int
}

func (e *sinkEnv) Emit(context.Context, string, int, any) error { e.n++; return nil }

// TestEventsCounted: the loop's events become the agent metrics, and every
// event still reaches the job's own RunEnv.
func TestEventsCounted(t *testing.T) {
	t.Parallel()
	type ev struct {
		typ   string
		round int
		data  map[string]any
	}
	events := []ev{
		{"llm.request", 1, map[string]any{"retry": 0, "tool_def_tokens": 100}},
		{"llm.response", 1, map[string]any{"retry": 0, "prompt_tokens": 50, "completion_tokens": 7}},
		{"tool.validation_failed", 1, map[string]any{"name": "add"}},
		{"tool.schema_retry", 1, map[string]any{"retry": 1, "tool_def_tokens": 30}},
		{"llm.request", 1, map[string]any{"retry": 1, "tool_def_tokens": 30}},
		{"llm.response", 1, map[string]any{"retry": 1, "prompt_tokens": 60, "completion_tokens": 5}},
		{"tool.result", 1, map[string]any{"name": "call_tool", "tool": "lookup", "duration_ms": 12, "error": true}},
		{"tool.result", 1, map[string]any{"name": "search_tools", "duration_ms": 1, "error": false}},
		{"llm.request", 2, map[string]any{"retry": 0, "tool_def_tokens": 100}},
		{"loop.outcome", 2, map[string]any{"tool_def_tokens": 230, "full_mode_tool_def_tokens": 1000}},
	}
	reg := prometheus.NewRegistry()
	m, err := telemetry.NewMetrics(reg, telemetry.Options{DefaultModel: "m-default"})
	if err != nil {
		t.Fatal(err)
	}
	env := &sinkEnv{}
	r := m.Runner(jobs.RunnerFunc(func(ctx context.Context, _ *jobs.Job, env jobs.RunEnv) (*jobs.Outcome, error) {
		for _, e := range events {
			_ = env.Emit(ctx, e.typ, e.round, e.data)
		}
		return &jobs.Outcome{}, nil
	}))
	job := &jobs.Job{ID: "j", Task: "t", ClientTools: []clienttools.Decl{{Name: "lookup"}}}
	if _, err := r.Run(context.Background(), job, env); err != nil {
		t.Fatal(err)
	}
	if env.n != len(events) {
		t.Errorf("%d events passed on, want %d", env.n, len(events))
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string, labels map[string]string) float64 {
		for _, f := range fams {
			if f.GetName() != name {
				continue
			}
		next:
			for _, m := range f.Metric {
				for _, l := range m.Label {
					if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
						continue next
					}
				}
				return m.GetCounter().GetValue()
			}
		}
		return -1
	}
	type L = map[string]string
	for _, c := range []struct {
		name   string
		labels L
		want   float64
	}{
		{"jetagent_model_requests_total", L{"model": "m-default", "outcome": "ok"}, 2},
		{"jetagent_model_requests_total", L{"model": "m-default", "outcome": "error"}, 1}, // round 2's request got no reply
		{"jetagent_model_tokens_total", L{"model": "m-default", "kind": "prompt"}, 110},
		{"jetagent_model_tokens_total", L{"model": "m-default", "kind": "completion"}, 12},
		{"jetagent_model_tokens_total", L{"model": "m-default", "kind": "tool_definition"}, 230},
		{"jetagent_model_tokens_total", L{"model": "m-default", "kind": "saved"}, 770},
		{"jetagent_tool_validation_total", L{"kind": "failed"}, 1},
		{"jetagent_tool_validation_total", L{"kind": "retry"}, 1},
		{"jetagent_tool_calls_total", L{"server": telemetry.ServerClient, "tool": "lookup", "outcome": "error"}, 1},
		{"jetagent_tool_calls_total", L{"server": telemetry.ServerBuiltin, "tool": "search_tools", "outcome": "ok"}, 1},
	} {
		if got := value(c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// TestJobLabelsBounded: the label values jobs choose (the model, client
// tool names, names the model makes up) make at most MaxJobLabelValues
// series per label, however many jobs name new ones; what is past the
// bound is still counted, under OtherLabel.
func TestJobLabelsBounded(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := telemetry.NewMetrics(reg, telemetry.Options{DefaultModel: "m-default"})
	if err != nil {
		t.Fatal(err)
	}
	r := m.Runner(jobs.RunnerFunc(func(ctx context.Context, job *jobs.Job, env jobs.RunEnv) (*jobs.Outcome, error) {
		_ = env.Emit(ctx, "llm.request", 1, map[string]any{"retry": 0, "tool_def_tokens": 1})
		_ = env.Emit(ctx, "llm.response", 1, map[string]any{"retry": 0, "prompt_tokens": 1, "completion_tokens": 1})
		for _, name := range []string{job.ClientTools[0].Name, "made_up_" + job.ID, "search_tools"} {
			_ = env.Emit(ctx, "tool.result", 1, map[string]any{"name": name, "duration_ms": 1, "error": false})
		}
		return &jobs.Outcome{}, nil
	}))
	const n = 3 * telemetry.MaxJobLabelValues
	for i := range n {
		id := fmt.Sprint(i)
		model := "model-" + id
		if i%10 == 0 {
			model = strings.Repeat("m", telemetry.MaxJobLabelBytes+1) + id
		}
		job := &jobs.Job{ID: id, Task: "t", Model: model, ClientTools: []clienttools.Decl{{Name: "tool_" + id}}}
		if _, err := r.Run(context.Background(), job, &sinkEnv{}); err != nil {
			t.Fatal(err)
		}
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	// values is the distinct values of label in family name, and the
	// counters' sum.
	values := func(name, label string) (map[string]bool, float64) {
		vs, sum := map[string]bool{}, 0.0
		for _, f := range fams {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.Metric {
				for _, l := range m.Label {
					if l.GetName() == label {
						vs[l.GetValue()] = true
					}
				}
				sum += m.GetCounter().GetValue()
			}
		}
		return vs, sum
	}
	models, requests := values("jetagent_model_requests_total", "model")
	if len(models) > telemetry.MaxJobLabelValues+1 || !models[telemetry.OtherLabel] {
		t.Errorf("%d model label values (want at most %d, %q among them)", len(models), telemetry.MaxJobLabelValues+1, telemetry.OtherLabel)
	}
	if requests != n {
		t.Errorf("%v model requests counted, want %d", requests, n)
	}
	for v := range models {
		if len(v) > telemetry.MaxJobLabelBytes {
			t.Errorf("a model label value of %d bytes", len(v))
		}
	}
	// Client tools, the builtin search_tools and OtherLabel (past the
	// bound, and every made-up name).
	tools, calls := values("jetagent_tool_calls_total", "tool")
	if len(tools) > telemetry.MaxJobLabelValues+2 || !tools[telemetry.OtherLabel] || !tools["search_tools"] || !tools["tool_0"] {
		t.Errorf("%d tool label values (want at most %d, with %q, search_tools and tool_0)", len(tools), telemetry.MaxJobLabelValues+2, telemetry.OtherLabel)
	}
	for v := range tools {
		if strings.HasPrefix(v, "made_up_") {
			t.Errorf("tool label %q: a name neither in the catalog nor declared", v)
		}
	}
	if calls != 3*n {
		t.Errorf("%v tool calls counted, want %d", calls, 3*n)
	}
}
