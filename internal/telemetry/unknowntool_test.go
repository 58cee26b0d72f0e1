package telemetry_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/telemetry"
)

// TestUnknownToolServer: a tool name the model made up (neither the
// loop's, nor in the catalog, nor declared by the job) is counted under
// server unknown, not client: client-tool errors are the submitters'
// tools failing, and a model calling names that do not exist is not that.
// The span's jetagent.tool.server says the same.
func TestUnknownToolServer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, tool         string // the event's name and tool (an indirect call's)
		wantServer, wantAs string // jetagent_tool_calls_total's server and tool labels
	}{
		{"lookup", "", telemetry.ServerClient, "lookup"},
		{"made_up", "", telemetry.ServerUnknown, telemetry.OtherLabel},
		{"call_tool", "made_up_inner", telemetry.ServerUnknown, telemetry.OtherLabel},
		{"call_tool", "lookup", telemetry.ServerClient, "lookup"},
		{"search_tools", "", telemetry.ServerBuiltin, "search_tools"},
	} {
		t.Run(c.name+"/"+c.tool, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewRegistry()
			m, err := telemetry.NewMetrics(reg, telemetry.Options{DefaultModel: "m"})
			if err != nil {
				t.Fatal(err)
			}
			rec, tp := recordSpans(t)
			inner := jobs.RunnerFunc(func(ctx context.Context, _ *jobs.Job, env jobs.RunEnv) (*jobs.Outcome, error) {
				_ = env.Emit(ctx, "tool.call", 1, map[string]any{"call_id": "c1", "name": c.name})
				_ = env.Emit(ctx, "tool.result", 1, map[string]any{"call_id": "c1", "name": c.name, "tool": c.tool, "duration_ms": 1, "error": true})
				return &jobs.Outcome{}, nil
			})
			r := m.Runner(telemetry.NewTracing(tp, telemetry.Options{DefaultModel: "m"}).Runner(inner))
			job := &jobs.Job{ID: "j", Task: "t", ClientTools: []clienttools.Decl{{Name: "lookup"}}}
			if _, err := r.Run(context.Background(), job, &attemptEnv{}); err != nil {
				t.Fatal(err)
			}
			fams, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, f := range fams {
				if f.GetName() != "jetagent_tool_calls_total" {
					continue
				}
				for _, s := range f.Metric {
					for _, l := range s.Label {
						got[l.GetName()] = l.GetValue()
					}
				}
			}
			if got["server"] != c.wantServer || got["tool"] != c.wantAs {
				t.Errorf("jetagent_tool_calls_total{server=%q, tool=%q}, want {server=%q, tool=%q}", got["server"], got["tool"], c.wantServer, c.wantAs)
			}
			for _, s := range rec.Ended() {
				for _, kv := range s.Attributes() {
					if kv.Key == "jetagent.tool.server" && kv.Value.AsString() != c.wantServer {
						t.Errorf("span %q: jetagent.tool.server %q, want %q", s.Name(), kv.Value.AsString(), c.wantServer)
					}
				}
			}
		})
	}
}
