package telemetry_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/telemetry"
)

// TestFailedRequestLatency: a model request the loop ended on (a provider
// error, a timeout) is in the latency histogram too, as outcome error, so
// a provider failing slowly shows in it; an answered one is outcome ok.
func TestFailedRequestLatency(t *testing.T) {
	t.Parallel()
	req := func(round, retry int) [3]any {
		return [3]any{"llm.request", round, map[string]any{"retry": retry}}
	}
	resp := func(round, retry int) [3]any {
		return [3]any{"llm.response", round, map[string]any{"retry": retry}}
	}
	outcome := [3]any{"loop.outcome", 0, map[string]any{}}
	for _, c := range []struct {
		name      string
		events    [][3]any
		ok, error uint64
	}{
		{"answered", [][3]any{req(1, 0), resp(1, 0), outcome}, 1, 0},
		{"unanswered", [][3]any{req(1, 0), outcome}, 0, 1},
		{"second round unanswered", [][3]any{req(1, 0), resp(1, 0), req(2, 0), outcome}, 1, 1},
		{"retry answered, next unanswered", [][3]any{req(1, 0), resp(1, 0), req(1, 1), resp(1, 1), req(2, 0), outcome}, 2, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewRegistry()
			m, err := telemetry.NewMetrics(reg, telemetry.Options{DefaultModel: "m"})
			if err != nil {
				t.Fatal(err)
			}
			r := m.Runner(jobs.RunnerFunc(func(ctx context.Context, _ *jobs.Job, env jobs.RunEnv) (*jobs.Outcome, error) {
				for _, e := range c.events {
					_ = env.Emit(ctx, e[0].(string), e[1].(int), e[2])
				}
				return &jobs.Outcome{}, nil
			}))
			if _, err := r.Run(context.Background(), &jobs.Job{ID: "j", Task: "t"}, &sinkEnv{}); err != nil {
				t.Fatal(err)
			}
			fams, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]uint64{}
			for _, f := range fams {
				if f.GetName() != "jetagent_model_request_duration_seconds" {
					continue
				}
				for _, s := range f.Metric {
					for _, l := range s.Label {
						if l.GetName() == "outcome" {
							got[l.GetValue()] += s.GetHistogram().GetSampleCount()
						}
					}
				}
			}
			if got["ok"] != c.ok || got["error"] != c.error {
				t.Errorf("latency samples ok %d, error %d; want %d, %d", got["ok"], got["error"], c.ok, c.error)
			}
		})
	}
}
