package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/natstest"
)

// TestPartitionedAttemptFencesItself cuts the node a running attempt's
// worker is connected to off from the two others, which keep quorum and
// lead every stream and consumer. The worker's connection stays up, so a
// heartbeat "confirmed" by a flush reached only its own node, never the
// consumer's leader: the job was delivered again on the majority side,
// the alive request and the fence notice could not cross, and once the
// network healed the first attempt went on beside the second (its
// events after the second's, its transcripts, journal writes and calls).
// An attempt whose heartbeats the consumer's leader does not confirm
// fences itself before the job is delivered again.
func TestPartitionedAttemptFencesItself(t *testing.T) {
	sc, nc1, nc2, topo := partitionSetup(t)

	started := make(chan int, 4)
	ended1 := make(chan error, 1)
	release1, release2 := make(chan struct{}), make(chan struct{})
	runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
		started <- env.Attempt()
		release := release2
		if env.Attempt() == 1 {
			release = release1
		}
		if err := env.Emit(ctx, "step", 1, map[string]string{"at": "start"}); err != nil {
			return nil, err
		}
		select {
		case <-release:
		case <-ctx.Done():
			if env.Attempt() == 1 {
				ended1 <- context.Cause(ctx)
			}
			return nil, ctx.Err()
		}
		err := env.Emit(ctx, "step", 1, map[string]string{"at": "released"})
		if env.Attempt() == 1 {
			ended1 <- err
		}
		if err != nil {
			return nil, err
		}
		return &Outcome{Result: agentloop.Result{Answer: "done"}}, nil
	})
	// No timed asset looks: the meta leader may be on the cut-off node.
	cfg := Config{Runner: runner, Concurrency: 1, Topology: topo, AssetCheck: -1, UnservedCheck: -1, Logger: failLog(t)}
	cfg.WorkerID = "w-minority"
	startWorker(t, nc1, cfg)
	c := newClient(t, nc2)
	if _, err := c.Submit(natstest.Context(t), &Job{ID: "split", Task: "run"}); err != nil {
		t.Fatal(err)
	}
	if a := withinWait(t, "first attempt", started); a != 1 {
		t.Fatalf("first attempt is %d", a)
	}
	cfg.WorkerID = "w-majority"
	startWorker(t, nc2, cfg)

	sc.isolate()
	if a := withinWait(t, "attempt on the majority side", started); a != 2 {
		t.Fatalf("next attempt is %d", a)
	}
	sc.heal()
	close(release1)
	if err := withinWait(t, "end of the first attempt", ended1); err == nil {
		t.Error("the first attempt went on after the job was delivered again; it published an event once the network healed")
	} else {
		t.Logf("first attempt ended: %v", err)
	}
	close(release2)
	// A later attempt may finish it: the healed node's groups can elect
	// their leaders anew, longer than an attempt's heartbeats may go
	// unanswered (the ack wait is short here).
	st := pollStatus(t, c, "split")
	if st.Status != StatusSucceeded || st.Attempt < 2 {
		t.Errorf("state %+v", st)
	}
	if got := settledEventAttempts(t, c, "split"); interleaved(got) {
		t.Errorf("events of two attempts interleaved: attempts %v", got)
	}
}

// TestAttemptTakenOverWhileCutOffStops is the partition above with the
// consumer's leader on the cut-off side: until it notices it lost its
// quorum (up to 10 s and more) it still answers the heartbeats of the
// worker there, while the majority elects a leader of its own that
// delivers the job again (the heartbeat fault stands for those answers).
// The alive request and the fence notice cannot cross; once the network
// healed the first attempt went on, its heartbeats answered, until its
// job's timeout. An attempt re-reads its job's state at each heartbeat and
// stops once it names another attempt.
func TestAttemptTakenOverWhileCutOffStops(t *testing.T) {
	sc, nc1, nc2, topo := partitionSetup(t)

	started := make(chan int, 4)
	ended1 := make(chan error, 1)
	release := make(chan struct{})
	runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
		started <- env.Attempt()
		if env.Attempt() == 1 {
			select {
			case <-release:
				ended1 <- nil
			case <-ctx.Done():
				ended1 <- context.Cause(ctx)
				return nil, ctx.Err()
			}
		}
		if err := env.Emit(ctx, "step", 1, map[string]string{"at": "end"}); err != nil {
			return nil, err
		}
		return &Outcome{Result: agentloop.Result{Answer: "done"}}, nil
	})
	cfg := Config{Runner: runner, Concurrency: 1, Topology: topo, AssetCheck: -1, UnservedCheck: -1, Logger: failLog(t)}
	cfg.WorkerID = "w-minority"
	startWorkerWith(t, nc1, cfg, func(w *Worker) {
		w.hbFault = func() (bool, bool) { return false, true } // answered by a leader that lost its quorum
	})
	c := newClient(t, nc2)
	if _, err := c.Submit(natstest.Context(t), &Job{ID: "stale", Task: "run"}); err != nil {
		t.Fatal(err)
	}
	if a := withinWait(t, "first attempt", started); a != 1 {
		t.Fatalf("first attempt is %d", a)
	}
	sc.isolate()
	cfg.WorkerID = "w-majority"
	startWorker(t, nc2, cfg)
	// Delivered again on the majority side (a redelivery that reached the
	// majority's worker before the cut was handed back: the first attempt
	// answered then).
	for a := 0; a < 2; {
		a = withinWait(t, "attempt on the majority side", started)
	}
	st := pollStatus(t, c, "stale")
	sc.heal()
	if err := withinWait(t, "end of the first attempt", ended1); err == nil {
		t.Fatal("the first attempt was released, not stopped")
	} else {
		t.Logf("first attempt ended: %v", err)
	}
	close(release)
	if st.Status != StatusSucceeded || st.Attempt < 2 || st.Worker != "w-majority" {
		t.Errorf("state %+v", st)
	}
	if got := settledEventAttempts(t, c, "stale"); interleaved(got) {
		t.Errorf("events of two attempts interleaved: attempts %v", got)
	}
}

// partitionSetup starts a split cluster with the jobs topology (R3, ack
// wait 3 s) led from n2, and connects to n1 (the worker that will be cut
// off) and n2 (the other worker, the client).
func partitionSetup(t *testing.T) (sc *splitCluster, nc1, nc2 *nats.Conn, topo TopologyConfig) {
	t.Helper()
	sc = startSplitCluster(t)
	nc1 = natstest.Connect(t, sc.nodes[0])
	nc2 = natstest.Connect(t, sc.nodes[1])
	topo = TopologyConfig{Replicas: 3, AckWait: 3 * time.Second, MaxDeliver: 5}
	js2, err := jetstream.New(nc2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureTopology(natstest.Context(t), js2, topo, nil); err != nil {
		t.Fatal(err)
	}
	leadStreamsFrom(t, nc2, "n2", allStreams, []string{"AGENT_JOBS/workers-default", "AGENT_ADVISORIES/dead-letterer"})
	return sc, nc1, nc2, topo
}
