package telemetry_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/telemetry"
)

// attemptEnv is a sinkEnv that says its attempt and worker (the job span's
// attributes).
type attemptEnv struct{ sinkEnv }

func (*attemptEnv) Attempt() int     { return 1 }
func (*attemptEnv) WorkerID() string { return "w" }

// TestSpanNamesBounded: the names of the spans of jobs are bounded as the
// metrics' labels are, whatever tool names a model makes up (a span name
// per made-up name would be a series per name in the span metrics a
// collector derives) and whatever models jobs name; the attributes keep
// the names as they came, cut to MaxSpanAttrBytes.
func TestSpanNamesBounded(t *testing.T) {
	t.Parallel()
	rec, tp := recordSpans(t)
	long := strings.Repeat("é", 50_000) // 100 KB, two bytes a character
	r := telemetry.NewTracing(tp, telemetry.Options{DefaultModel: "m-default"}).Runner(
		jobs.RunnerFunc(func(ctx context.Context, job *jobs.Job, env jobs.RunEnv) (*jobs.Outcome, error) {
			_ = env.Emit(ctx, "llm.request", 1, map[string]any{"retry": 0, "tool_def_tokens": 1})
			_ = env.Emit(ctx, "llm.response", 1, map[string]any{"retry": 0, "finish_reason": "tool_calls" + long})
			calls := []struct{ name, tool string }{
				{job.ClientTools[0].Name, ""},
				{"made_up_" + job.ID, ""},
				{"search_tools", ""},
				{"call_tool", "made_up_inner_" + job.ID},
				{long + job.ID, ""},
			}
			for i, c := range calls {
				id := fmt.Sprint("call_", i, long)
				_ = env.Emit(ctx, "tool.call", 1, map[string]any{"call_id": id, "name": c.name})
				_ = env.Emit(ctx, "tool.result", 1, map[string]any{"call_id": id, "name": c.name, "tool": c.tool, "error": false})
			}
			return &jobs.Outcome{}, nil
		}))
	const n = 3 * telemetry.MaxJobLabelValues
	for i := range n {
		id := fmt.Sprint(i)
		model := "model-" + id
		if i%10 == 0 {
			model = long + id
		}
		job := &jobs.Job{ID: id, Task: "t", Model: model, ClientTools: []clienttools.Decl{{Name: "tool_" + id}}}
		if _, err := r.Run(context.Background(), job, &attemptEnv{}); err != nil {
			t.Fatal(err)
		}
	}
	names := map[string]int{}
	for _, s := range rec.Ended() {
		names[s.Name()]++
		if len(s.Name()) > len("execute_tool ")+telemetry.MaxJobLabelBytes {
			t.Errorf("a span name of %d bytes: %.60q...", len(s.Name()), s.Name())
		}
		for _, kv := range s.Attributes() {
			for _, v := range append(kv.Value.AsStringSlice(), kv.Value.AsString()) {
				if len(v) > telemetry.MaxSpanAttrBytes {
					t.Errorf("span %.40q: attribute %s of %d bytes", s.Name(), kv.Key, len(v))
				}
			}
		}
	}
	if got := len(rec.Ended()); got != 7*n {
		t.Fatalf("%d spans, want %d (a job, a request and 5 tool calls per job)", got, 7*n)
	}
	// "job default", the models within the bound and "chat other", the
	// client tools within the bound, "execute_tool search_tools" and
	// "execute_tool other".
	if max := 1 + telemetry.MaxJobLabelValues + 1 + telemetry.MaxJobLabelValues + 2; len(names) > max {
		t.Errorf("%d distinct span names, want at most %d", len(names), max)
	}
	for _, want := range []string{"job default", "chat other", "chat model-1", "execute_tool other", "execute_tool search_tools", "execute_tool tool_1"} {
		if names[want] == 0 {
			t.Errorf("no span %q", want)
		}
	}
	for name := range names {
		if strings.Contains(name, "made_up") {
			t.Errorf("span %q: a tool name neither in the catalog nor declared", name)
		}
	}
	// The attributes still say which tool the model asked for.
	var madeUp bool
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			if kv.Key == "gen_ai.tool.name" && kv.Value.AsString() == "made_up_inner_7" {
				madeUp = true
			}
		}
	}
	if !madeUp {
		t.Error("no span with gen_ai.tool.name made_up_inner_7")
	}
}
