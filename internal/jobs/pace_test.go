package jobs

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestPaceFollowsTheConsumer: a queue's consumer has the ack wait and max
// deliveries of the last worker to start. A worker started before, with a
// longer ack wait (a rolling restart that shortens JETAGENT_ACK_WAIT), went
// on heartbeating at its own pace, and the server redelivered its running
// job; one with more deliveries took a job's last delivery for an earlier
// one. Its attempts now follow the consumer's settings.
func TestPaceFollowsTheConsumer(t *testing.T) {
	t.Parallel()
	// updateConsumer gives the default queue's consumer other settings, as
	// a worker started with them does.
	updateConsumer := func(t *testing.T, c *Client, change func(*jetstream.ConsumerConfig)) {
		t.Helper()
		ctx := natstest.Context(t)
		cons, err := c.topo.Jobs.Consumer(ctx, c.names.Consumer(DefaultQueue))
		if err != nil {
			t.Fatal(err)
		}
		cfg := cons.CachedInfo().Config
		change(&cfg)
		if _, err := c.topo.Jobs.UpdateConsumer(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("shorter ack wait", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		nc := natstest.Connect(t, s)
		ctx := natstest.Context(t)
		r := newTestRunner()
		rec, log := newRecordLog()
		beats := make(chan struct{}, 100)
		// Own ack wait a minute (a heartbeat every 20 s); the consumer's
		// becomes 6 s.
		startWorkerWith(t, nc, Config{Runner: r, Logger: log, AssetCheck: 200 * time.Millisecond, UnservedCheck: -1,
			Topology: TopologyConfig{AckWait: time.Minute, MaxDeliver: 3}}, func(w *Worker) {
			w.hbFault = func() (bool, bool) {
				select {
				case beats <- struct{}{}:
				default:
				}
				return true, true
			}
		})
		c := newClient(t, nc)
		const id = "paced"
		if _, err := c.Submit(ctx, &Job{ID: id, Task: "gate:paced"}); err != nil {
			t.Fatal(err)
		}
		r.waitStarted(t, 1)
		updateConsumer(t, c, func(cfg *jetstream.ConsumerConfig) { cfg.AckWait = 6 * time.Second })
		if _, err := rec.wait(ctx, "the consumer of the queue has other settings than this worker's"); err != nil {
			t.Fatal(err)
		}
		cons, err := c.topo.Jobs.Consumer(ctx, c.names.Consumer(DefaultQueue))
		if err != nil {
			t.Fatal(err)
		}
		delivered := func() uint64 {
			t.Helper()
			info, err := cons.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return info.Delivered.Consumer
		}
		// Four beats at the new pace (2 s) outlast the consumer's 6 s ack
		// wait; at the old one (20 s) they would not come in this test's time.
		<-beats // the first, at once, or a stale one from before
		before := delivered()
		for range 4 {
			select {
			case <-beats:
			case <-ctx.Done():
				t.Fatal("the heartbeats did not follow the consumer's ack wait")
			}
		}
		if after := delivered(); after != before {
			t.Errorf("the running job was delivered again (consumer sequence %d, then %d)", before, after)
		}
		r.release("paced")
		if st := waitStatus(t, c, id); st.Status != StatusSucceeded || st.Attempt != 1 {
			t.Errorf("state %+v; want succeeded by attempt 1", st)
		}
	})

	t.Run("fewer deliveries", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		nc := natstest.Connect(t, s)
		ctx := natstest.Context(t)
		rec, log := newRecordLog()
		var runs atomic.Int32
		runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
			runs.Add(1)
			return nil, Retryable(errors.New("provider overloaded"))
		})
		startWorker(t, nc, Config{Runner: runner, Logger: log, AssetCheck: 200 * time.Millisecond, UnservedCheck: -1,
			Topology: TopologyConfig{AckWait: 2 * time.Second, MaxDeliver: 5}})
		c := newClient(t, nc)
		updateConsumer(t, c, func(cfg *jetstream.ConsumerConfig) { cfg.MaxDeliver = 2 })
		if _, err := rec.wait(ctx, "the consumer of the queue has other settings than this worker's"); err != nil {
			t.Fatal(err)
		}
		const id = "two-deliveries"
		if _, err := c.Submit(ctx, &Job{ID: id, Task: "x"}); err != nil {
			t.Fatal(err)
		}
		st := waitStatus(t, c, id)
		// The worker settles the last delivery itself, with the run's error;
		// before, it handed it back and the max-deliveries advisory
		// dead-lettered the job after the ack wait.
		if st.Status != StatusDead || !strings.HasPrefix(st.Error, "max deliveries (2) exhausted: provider overloaded") || runs.Load() != 2 {
			t.Errorf("state %s %q after %d runs; want dead after 2 with the run's error", st.Status, st.Error, runs.Load())
		}
	})
}
