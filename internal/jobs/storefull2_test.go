package jobs

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/agentloop"
)

// TestLastDeliverySettledOnceTheStoreHasRoom: the store filling while a
// job's last allowed delivery runs. Its final state could not be written
// ("insufficient resources"), and the delivery was handed back like an
// earlier one; being the last, nothing delivered it again, the server's
// max-deliveries advisory was refused by the full store too, and once an
// operator made room the job stayed running for ever, its answer lost
// (seen end to end with bin/worker on a stock nats-server whose
// max_file_store filled with jobs of large answers: two jobs left running
// at attempt 5). The last delivery is now kept, heartbeating, and its state
// written once the store has room, as its claim already was
// (TestLastDeliveryKeptWhileTheStoreIsFull). The runner does not run again.
func TestLastDeliverySettledOnceTheStoreHasRoom(t *testing.T) {
	t.Parallel()
	topo := TopologyConfig{AckWait: 2 * time.Second, MaxDeliver: 1}
	nc, js, ctx := smallStore(t, topo)
	started, finish := make(chan struct{}, 4), make(chan struct{})
	runs := make(chan struct{}, 4)
	runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
		runs <- struct{}{}
		started <- struct{}{}
		select {
		case <-finish:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &Outcome{Result: agentloop.Result{Answer: "done", Rounds: 1, StopReason: "final_answer"}}, nil
	})
	rec, log := newRecordLog()
	startWorker(t, nc, Config{Runner: runner, WorkerID: "w1", Logger: log, Topology: topo})
	c := newClient(t, nc)
	const id = "full-settle"
	if _, err := c.Submit(ctx, &Job{ID: id, Task: "answer"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the job did not start")
	}
	// Another tenant fills the store while the job runs.
	fill := fillStore(t, ctx, js)
	close(finish)
	// The state write fails: kept (now) or handed back (before).
	for {
		rec.mu.Lock()
		lines, added := strings.Join(rec.lines, "\n"), rec.added
		rec.mu.Unlock()
		if strings.Contains(lines, "last delivery cannot be settled") || strings.Contains(lines, "final state could not be stored") {
			break
		}
		select {
		case <-added:
		case <-ctx.Done():
			t.Fatalf("the state write did not fail; log:\n%s", lines)
		}
	}
	// The operator frees room.
	if err := js.DeleteStream(ctx, fill.CachedInfo().Config.Name); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	st, err := c.states.wait(wctx, id, func(s *State) bool { return s.Status.Terminal() })
	if err != nil {
		cur, _, _ := c.states.get(ctx, id)
		rec.mu.Lock()
		lines := strings.Join(rec.lines, "\n")
		rec.mu.Unlock()
		t.Fatalf("the job did not end once the store had room (state %+v): %v\nlog:\n%s", cur, err, lines)
	}
	if st.Status != StatusSucceeded || st.Attempt != 1 || st.Result == nil || st.Result.Answer != "done" {
		t.Errorf("state %s attempt %d (%s) %+v, want succeeded attempt 1 with its answer", st.Status, st.Attempt, st.Error, st.Result)
	}
	if len(runs) != 1 {
		t.Errorf("ran %d times", len(runs))
	}
	if dls := streamMsgs(t, nc, c.names.DLQStream(), ""); len(dls) != 0 {
		t.Errorf("%d dead letters", len(dls))
	}
}
