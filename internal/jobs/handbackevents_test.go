package jobs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/natstest"
)

// A hand-back whose state write cannot be stored (the state bucket's
// stream without a leader, while the events stream has one; seen on a
// stock 3-node cluster as "state could not be stored; handing the job
// back all the same") handed the delivery back without its retry event
// and without waiting for the attempt's last events: a reader saw the
// attempt stop mid-round, with no word why. They now go out before the
// delivery does, as on the ordinary hand-back.
func TestHandBackWithoutStateKeepsItsEvents(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	ctx := natstest.Context(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stateStream := "KV_" + (Names{Prefix: DefaultPrefix}).StateBucket()
	topo := TopologyConfig{AckWait: 3 * stateOpBound, MaxDeliver: 3}
	release := make(chan struct{})
	runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
		if env.Attempt() == 1 {
			if err := env.Emit(ctx, "note", 1, map[string]string{"text": "before"}); err != nil {
				return nil, err
			}
			<-release
			return nil, Retryable(errors.New("provider overloaded"))
		}
		return &Outcome{Result: agentloop.Result{Answer: "done"}}, nil
	})
	rec, log := newRecordLog()
	// No periodic look for gone assets: made again while the hand-back's
	// write was retried, the bucket held no state and the hand-back took
	// the rebuilt path (TestHandBackWhenTheStateIsGone), which CI saw once.
	startWorker(t, nc, Config{Runner: runner, WorkerID: "w1", Logger: log, Topology: topo, AssetCheck: -1})
	c := newClient(t, nc)
	const id = "hb-1"
	if _, err := c.Submit(ctx, &Job{ID: id, Task: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.wait(ctx, "job started"); err != nil {
		t.Fatal(err)
	}
	// The state's store goes away; the events' stays.
	if err := js.DeleteStream(ctx, stateStream); err != nil {
		t.Fatal(err)
	}
	close(release)
	if _, err := rec.wait(ctx, "state could not be stored; handing the job back all the same"); err != nil {
		t.Fatal(err)
	}
	// The next delivery's claim fails and nudges the worker's look for
	// gone assets: the bucket is made again, and a later delivery ends
	// the job.
	if _, err := rec.wait(ctx, "JetStream assets created again"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	st, err := c.states.wait(wctx, id, func(s *State) bool { return s.Status.Terminal() })
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != StatusSucceeded {
		t.Errorf("state %s (%s)", st.Status, st.Error)
	}
	types := attemptEventTypes(t, nc, c, id, 1)
	if len(types) == 0 || types[len(types)-1] != EventRetry {
		t.Errorf("attempt 1's events %v do not end with its %s", types, EventRetry)
	}
}
