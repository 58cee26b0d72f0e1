package jobs

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/natstest"
)

// Events the stream refuses (an operator's max_bytes with discard new
// reached, or a full store) hold the settling flush for its whole bound.
// What followed ran on the spent context: the transcripts failed at once
// ("transcript store failed", the job succeeded without them, seen with a
// stock nats-server) and an answer too long for the state could not be
// stored beside it, so the job was handed back, again on every attempt.
func TestSettlingOutlivesRefusedEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		long bool // an answer over max_payload: stored beside the state
	}{
		{"transcript", false},
		{"long answer", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			nc := natstest.Connect(t, s)
			answer := "done"
			if tc.long {
				answer = strings.Repeat("a", int(nc.MaxPayload())+1)
			}
			runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
				msgs := []llm.Message{{Role: llm.RoleUser, Content: job.Task}, {Role: llm.RoleAssistant, Content: "x"}}
				return &Outcome{Result: agentloop.Result{Answer: answer, Messages: msgs, Rounds: 1}, Reflected: msgs}, nil
			})
			rec, log := newRecordLog()
			// The ack wait outlasts the flush's bound: no redelivery.
			startWorker(t, nc, Config{Runner: runner, WorkerID: "w1", Logger: log,
				Topology: TopologyConfig{AckWait: 3 * flushTimeout, MaxDeliver: 3}})
			ctx := natstest.Context(t)
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			c := newClient(t, nc)
			ev, err := js.Stream(ctx, c.names.EventsStream())
			if err != nil {
				t.Fatal(err)
			}
			cfg := ev.CachedInfo().Config
			cfg.MaxBytes, cfg.Discard = 1, jetstream.DiscardNew // the operator's limit, reached
			if _, err := js.UpdateStream(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			id := "refused-" + strings.ReplaceAll(tc.name, " ", "-")
			if _, err := c.Submit(ctx, &Job{ID: id, Task: "x"}); err != nil {
				t.Fatal(err)
			}
			// Each attempt spends the flush's bound on the refused events;
			// a machine too loaded for the state write's own bound hands
			// attempt 1 back (seen under -race at a load of 20), and the
			// next one settles it: two attempts' time, not the wait's.
			wctx, cancel := context.WithTimeout(context.Background(), 2*(flushTimeout+2*stateOpBound))
			defer cancel()
			st, err := c.states.wait(wctx, id, func(s *State) bool { return s.Status.Terminal() })
			if err != nil {
				t.Fatalf("the job did not end: %v; log:\n%s", err, rec.text())
			}
			if st.Status != StatusSucceeded {
				t.Fatalf("state %s attempt %d (%s)", st.Status, st.Attempt, st.Error)
			}
			// What the spent context did: the transcripts failed at once,
			// the long answer could not be stored, and the job was handed
			// back for it on every attempt.
			for _, l := range []string{"transcript store failed", "result store failed"} {
				if rec.count(l) != 0 {
					t.Errorf("logged %q; log:\n%s", l, rec.text())
				}
			}
			if st.Attempt != 1 && rec.count("final state could not be stored") == 0 {
				t.Errorf("succeeded on attempt %d, with no state write that timed out before; log:\n%s", st.Attempt, rec.text())
			}
			if st.Result.Transcript != TranscriptName(id) {
				t.Errorf("the result names no transcript; log:\n%s", rec.text())
			}
			b, err := c.Transcript(ctx, id, false)
			var tr Transcript
			if err == nil {
				err = json.Unmarshal(b, &tr)
			}
			if err != nil || tr.JobID != id {
				t.Errorf("transcript of %q: %v", tr.JobID, err)
			}
			if tc.long && st.Result.AnswerRef == nil {
				t.Error("the long answer has no reference")
			}
			if rec.count("events not acknowledged") == 0 {
				t.Error("the refused events were not logged")
			}
		})
	}
}
