package jobs

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestPanickingJobFailsWithItsReason: a job whose run panics (a poison
// job: every attempt would panic the same way) is failed once, with the
// panic as its reason in the state and the failed event; it is not
// delivered again, and the worker goes on taking jobs. (A job that always
// fails with a transient error is dead-lettered after MaxDeliver, and one
// that kills its worker every time is dead-lettered from the server's
// advisory: TestMaxDeliverDeadLetters.)
func TestPanickingJobFailsWithItsReason(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, startServer(t))
	var panics atomic.Int32
	echo := newTestRunner()
	runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
		if job.Task == "panic" {
			panics.Add(1)
			var m map[string]int
			m["boom"]++ //nolint:staticcheck // a nil map on purpose: a real runtime panic
		}
		return echo.Run(ctx, job, env)
	})
	startWorker(t, nc, Config{Runner: runner, Concurrency: 1})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	if _, err := c.Submit(ctx, &Job{ID: "poison", Task: "panic"}); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, c, "poison")
	const reason = "runner panicked: assignment to entry in nil map"
	if st.Status != StatusFailed || st.Error != reason || st.Attempt != 1 || st.Result == nil || st.Result.Error != reason {
		t.Fatalf("state %+v, result %+v; want failed with %q on attempt 1", st, st.Result, reason)
	}
	var kinds []string
	for _, ev := range watchEvents(t, c, "poison") {
		kinds = append(kinds, ev.Type)
	}
	if got := strings.Join(kinds, ","); got != "started,failed" {
		t.Errorf("events %s, want started,failed", got)
	}

	// The worker survived and still runs jobs; the poison job is gone
	// from the queue, not delivered again.
	if _, err := c.Submit(ctx, &Job{ID: "after", Task: "echo:ok"}); err != nil {
		t.Fatal(err)
	}
	if st := waitStatus(t, c, "after"); st.Status != StatusSucceeded || st.Result.Answer != "ok" {
		t.Fatalf("the next job: %+v", st)
	}
	waitEmpty(t, nc, c)
	if n := panics.Load(); n != 1 {
		t.Errorf("the poison job ran %d times, want once", n)
	}
	if dls := streamMsgs(t, nc, c.names.DLQStream(), ""); len(dls) != 0 {
		t.Errorf("%d dead letters for a job that ran and failed", len(dls))
	}
}
