package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/natstest"
	"github.com/jetagent/jetagent/schemas"
)

// TestOversizedResultsSettle: a job whose answer or error text would make
// its state larger than the server's max_payload settles on its first
// attempt: the full text goes to the transcript store, the state keeps a
// preview with a reference (valid against schemas/state.schema.json), and
// the client reads the full text back from the state and the terminal event.
func TestOversizedResultsSettle(t *testing.T) {
	t.Parallel()
	const maxPayload = 32 << 10
	s := startSmallServer(t, maxPayload)
	nc := natstest.Connect(t, s)

	// Multi-byte characters, so a preview cut at a byte count must not split one.
	answer := strings.Repeat("réponse ", 12<<10)        // ~108 KiB
	errText := strings.Repeat("échec ", 12<<10) + "fin" // one line, as the worker records it
	var mu sync.Mutex
	runs := map[string]int{}
	runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
		mu.Lock()
		runs[job.ID]++
		mu.Unlock()
		if job.Task == "fail" {
			return nil, errors.New(errText)
		}
		return &Outcome{Result: agentloop.Result{Answer: answer, Rounds: 1, StopReason: "final_answer",
			Messages: []llm.Message{{Role: llm.RoleUser, Content: job.Task}, {Role: llm.RoleAssistant, Content: answer}}}}, nil
	})
	startWorker(t, nc, Config{Runner: runner})
	c := newClient(t, nc)
	v, err := NewValidator(0)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		id, task   string
		status     Status
		full       string
		text       func(*Result) string
		ref        func(*Result) *DataRef
		wantRefFor string
	}{
		{"big-answer", "ok", StatusSucceeded, answer,
			func(r *Result) string { return r.Answer }, func(r *Result) *DataRef { return r.AnswerRef }, AnswerName("big-answer")},
		{"big-error", "fail", StatusFailed, errText,
			func(r *Result) string { return r.Error }, func(r *Result) *DataRef { return r.ErrorRef }, ErrorName("big-error")},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			ctx := natstest.Context(t)
			if _, err := c.Submit(ctx, &Job{ID: tt.id, Task: tt.task}); err != nil {
				t.Fatal(err)
			}
			evs := watchEvents(t, c, tt.id)
			st := waitStatus(t, c, tt.id)
			if st.Status != tt.status || st.Attempt != 1 {
				t.Fatalf("state %s attempt %d", st.Status, st.Attempt)
			}
			mu.Lock()
			n := runs[tt.id]
			mu.Unlock()
			if n != 1 {
				t.Errorf("ran %d times", n)
			}

			e, err := c.topo.State.Get(ctx, tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if len(e.Value()) > maxPayload {
				t.Errorf("state is %d bytes", len(e.Value()))
			}
			if err := v.Validate(schemas.State, e.Value()); err != nil {
				t.Errorf("state: %v", err)
			}
			ref := tt.ref(st.Result)
			if ref == nil || ref.Name != tt.wantRefFor || ref.Bucket != "AGENT_TRANSCRIPTS" || ref.Bytes != len(tt.full) {
				t.Fatalf("ref %+v", ref)
			}
			if p := tt.text(st.Result); len(p) == 0 || len(p) > PreviewBytes || !strings.HasPrefix(tt.full, p) {
				t.Errorf("preview of %d bytes", len(p))
			}

			full, err := c.FullState(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			if tt.text(full.Result) != tt.full || tt.ref(full.Result) != nil {
				t.Errorf("FullState: %d bytes, want %d", len(tt.text(full.Result)), len(tt.full))
			}
			if tt.status == StatusFailed && full.Error != tt.full {
				t.Errorf("FullState error: %d bytes", len(full.Error))
			}

			last := evs[len(evs)-1]
			b, _ := json.Marshal(last)
			if err := v.Validate(schemas.Event, b); err != nil {
				t.Errorf("terminal event: %v", err)
			}
			var res Result
			if err := json.Unmarshal(last.Data, &res); err != nil || res.Status != tt.status {
				t.Fatalf("terminal event %.300s", last.Data)
			}
			got, err := c.FullResult(ctx, &res)
			if err != nil || tt.text(got) != tt.full {
				t.Errorf("FullResult of the terminal event: %v", err)
			}
		})
	}
}
