package telemetry_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/telemetry"
)

// TestJobSpanAttemptTokens: a job span's gen_ai.usage are its attempt's
// (the model replies it got), not the job's running total: an attempt
// resumed after a hand-back reports the whole job's usage in its outcome,
// so the attempts' spans of one trace summed to more than was used (100
// then 200 for a job of 200 tokens). The job's total is
// jetagent.job.input_tokens / output_tokens.
func TestJobSpanAttemptTokens(t *testing.T) {
	t.Parallel()
	reply := func(in, out int) map[string]any {
		return map[string]any{"retry": 0, "prompt_tokens": in, "completion_tokens": out}
	}
	for _, c := range []struct {
		name                string
		replies             []map[string]any
		total               llm.Usage // the outcome's (the job's so far)
		wantIn, wantOut     int64
		wantJobIn, wantJobO int64
	}{
		{"fresh attempt", []map[string]any{reply(30, 5), reply(40, 2)}, llm.Usage{PromptTokens: 70, CompletionTokens: 7}, 70, 7, 70, 7},
		{"resumed attempt", []map[string]any{reply(100, 10)}, llm.Usage{PromptTokens: 200, CompletionTokens: 20}, 100, 10, 200, 20},
		{"no reply", nil, llm.Usage{PromptTokens: 100, CompletionTokens: 10}, 0, 0, 100, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rec, tp := recordSpans(t)
			r := telemetry.NewTracing(tp, telemetry.Options{DefaultModel: "m"}).Runner(
				jobs.RunnerFunc(func(ctx context.Context, _ *jobs.Job, env jobs.RunEnv) (*jobs.Outcome, error) {
					for i, d := range c.replies {
						_ = env.Emit(ctx, "llm.request", i+1, map[string]any{"retry": 0})
						_ = env.Emit(ctx, "llm.response", i+1, d)
					}
					return &jobs.Outcome{Result: agentloop.Result{StopReason: "final_answer", Usage: agentloop.Usage{Usage: c.total}}}, nil
				}))
			if _, err := r.Run(context.Background(), &jobs.Job{ID: "j", Task: "t"}, &attemptEnv{}); err != nil {
				t.Fatal(err)
			}
			got := map[string]int64{}
			for _, s := range rec.Ended() {
				if s.Name() != "job default" {
					continue
				}
				for _, kv := range s.Attributes() {
					got[string(kv.Key)] = kv.Value.AsInt64()
				}
			}
			if got["gen_ai.usage.input_tokens"] != c.wantIn || got["gen_ai.usage.output_tokens"] != c.wantOut {
				t.Errorf("job span gen_ai.usage %d+%d, want the attempt's %d+%d",
					got["gen_ai.usage.input_tokens"], got["gen_ai.usage.output_tokens"], c.wantIn, c.wantOut)
			}
			if got["jetagent.job.input_tokens"] != c.wantJobIn || got["jetagent.job.output_tokens"] != c.wantJobO {
				t.Errorf("job span jetagent.job tokens %d+%d, want the job's %d+%d",
					got["jetagent.job.input_tokens"], got["jetagent.job.output_tokens"], c.wantJobIn, c.wantJobO)
			}
		})
	}
}

// recordSpans is a tracer provider whose ended spans rec keeps, shut down
// when the test ends.
func recordSpans(t *testing.T) (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return rec, tp
}
