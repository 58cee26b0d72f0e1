package telemetry_test

import (
	"context"
	"testing"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/telemetry"
)

// TestCodeModeCallSpans: the tool calls an execute_code run makes (events
// with parent_call_id) are children of the execute_code span, not its
// siblings under the job span; a parent_call_id naming no open call leaves
// the call under the job span.
func TestCodeModeCallSpans(t *testing.T) {
	t.Parallel()
	type ev struct {
		typ  string
		data map[string]any
	}
	call := func(id, name, parent string) ev {
		d := map[string]any{"call_id": id, "name": name}
		if parent != "" {
			d["parent_call_id"] = parent
		}
		return ev{"tool.call", d}
	}
	result := func(id, name string) ev {
		return ev{"tool.result", map[string]any{"call_id": id, "name": name, "error": false}}
	}
	for _, c := range []struct {
		name   string
		events []ev
		// parents maps a call id to the call id of its parent span ("":
		// the job span).
		parents map[string]string
	}{
		{"inner calls", []ev{
			call("code1", "execute_code", ""), call("i1", "add", "code1"), result("i1", "add"),
			call("i2", "add", "code1"), result("i2", "add"), result("code1", "execute_code"),
		}, map[string]string{"code1": "", "i1": "code1", "i2": "code1"}},
		{"plain calls", []ev{
			call("a", "add", ""), call("b", "add", ""), result("a", "add"), result("b", "add"),
		}, map[string]string{"a": "", "b": ""}},
		{"parent already ended", []ev{
			call("code1", "execute_code", ""), result("code1", "execute_code"), call("late", "add", "code1"), result("late", "add"),
		}, map[string]string{"code1": "", "late": ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rec, tp := recordSpans(t)
			r := telemetry.NewTracing(tp, telemetry.Options{DefaultModel: "m"}).Runner(
				jobs.RunnerFunc(func(ctx context.Context, _ *jobs.Job, env jobs.RunEnv) (*jobs.Outcome, error) {
					for _, e := range c.events {
						_ = env.Emit(ctx, e.typ, 1, e.data)
					}
					return &jobs.Outcome{}, nil
				}))
			if _, err := r.Run(context.Background(), &jobs.Job{ID: "j", Task: "t"}, &attemptEnv{}); err != nil {
				t.Fatal(err)
			}
			callOf := map[string]string{} // span id -> call id
			var jobSpan string
			for _, s := range rec.Ended() {
				if s.Name() == "job default" {
					jobSpan = s.SpanContext().SpanID().String()
				}
				for _, kv := range s.Attributes() {
					if kv.Key == "gen_ai.tool.call.id" {
						callOf[s.SpanContext().SpanID().String()] = kv.Value.AsString()
					}
				}
			}
			seen := 0
			for _, s := range rec.Ended() {
				id, ok := callOf[s.SpanContext().SpanID().String()]
				if !ok {
					continue
				}
				seen++
				want, parent := c.parents[id], s.Parent().SpanID().String()
				switch {
				case want == "" && parent != jobSpan:
					t.Errorf("call %s: parent span %s (call %q), want the job span", id, parent, callOf[parent])
				case want != "" && callOf[parent] != want:
					t.Errorf("call %s: parent span %s (call %q), want call %s's", id, parent, callOf[parent], want)
				}
			}
			if seen != len(c.parents) {
				t.Errorf("%d call spans, want %d", seen, len(c.parents))
			}
		})
	}
}
