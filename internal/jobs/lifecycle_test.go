package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/natstest"
)

func TestCancel(t *testing.T) {
	t.Parallel()

	t.Run("running job", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		nc := natstest.Connect(t, s)
		r := newTestRunner()
		startWorker(t, nc, Config{Runner: r})
		c := newClient(t, nc)
		if _, err := c.Submit(natstest.Context(t), &Job{ID: "long", Task: "block"}); err != nil {
			t.Fatal(err)
		}
		r.waitStarted(t, 1)
		waitStatus(t, c, "long", StatusRunning)

		// Cancel returns once the job stopped. A bound against a hang, not
		// a speed target: one second, for several round trips and the
		// worker's final write under the package's parallel -race load,
		// was a bet on the machine.
		st, err := c.Cancel(natstest.Context(t), "long")
		if err != nil {
			t.Fatalf("cancel: %v", err)
		}
		if st.Status != StatusCancelled || !st.CancelRequested || st.Error != "cancelled on request" {
			t.Fatalf("state %+v", st)
		}
		waitEmpty(t, nc, c) // acknowledged: it can never be delivered again
		if r.runCount("long") != 1 {
			t.Errorf("ran %d times", r.runCount("long"))
		}
		// Cancelling again is a no-op on a final job.
		if st, err := c.Cancel(natstest.Context(t), "long"); err != nil || st.Status != StatusCancelled {
			t.Errorf("second cancel: %+v %v", st, err)
		}
	})

	t.Run("queued job", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		nc := natstest.Connect(t, s)
		r := newTestRunner()
		// The worker serves another queue, so the job waits.
		startWorker(t, nc, Config{Runner: r, Topology: TopologyConfig{AckWait: 2 * time.Second, Queues: []string{"other"}}})
		c := newClient(t, nc)
		ctx := natstest.Context(t)
		if _, err := c.Submit(ctx, &Job{ID: "waiting", Task: "echo:x", Queue: "q2"}); err != nil {
			t.Fatal(err)
		}
		st, err := c.Cancel(ctx, "waiting")
		if err != nil || st.Status != StatusCancelled {
			t.Fatalf("cancel: %+v %v", st, err)
		}
		var events []string
		if _, err := c.Watch(ctx, "waiting", func(ev Event) { events = append(events, ev.Type) }); err != nil {
			t.Fatal(err)
		}
		if strings.Join(events, ",") != "cancelled" {
			t.Errorf("events %v", events)
		}
		// A worker that takes the message now acknowledges it unrun.
		startWorker(t, nc, Config{Runner: r, Topology: TopologyConfig{AckWait: 2 * time.Second, Queues: []string{"q2"}}})
		waitEmpty(t, nc, c)
		if r.runCount("waiting") != 0 {
			t.Error("a cancelled job ran")
		}
	})

	t.Run("unknown job", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		nc := natstest.Connect(t, s)
		startWorker(t, nc, Config{Runner: newTestRunner()})
		c := newClient(t, nc)
		if _, err := c.Cancel(natstest.Context(t), "nope"); err == nil {
			t.Fatal("cancelled a job that does not exist")
		}
	})
}

// waitEmpty waits until the jobs stream holds no message.
func waitEmpty(t *testing.T, nc *nats.Conn, c *Client) {
	t.Helper()
	// An ack that settles nothing else (a redelivery of a final job) has
	// no event to wait on, so ask the stream, paced by NATS round trips.
	ctx := natstest.Context(t)
	for {
		info, err := c.topo.Jobs.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 0 {
			return
		}
		if err := nc.FlushWithContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	ra := newTestRunner()
	_, stopA := startWorker(t, nc, Config{Runner: ra, WorkerID: "a", Concurrency: 3, ShutdownGrace: time.Second})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	ids := []string{"quick", "stuck-1", "stuck-2"}
	tasks := map[string]string{"quick": "gate:quick", "stuck-1": "gate:never", "stuck-2": "gate:never"}
	for _, id := range ids {
		if _, err := c.Submit(ctx, &Job{ID: id, Task: tasks[id]}); err != nil {
			t.Fatal(err)
		}
	}
	ra.waitStarted(t, 3)

	stopped := make(chan struct{})
	go func() { stopA(); close(stopped) }()
	ra.release("quick") // finishes within the grace period
	if st := waitStatus(t, c, "quick"); st.Status != StatusSucceeded || st.Worker != "a" {
		t.Fatalf("quick: %+v", st)
	}
	<-stopped
	for _, id := range []string{"stuck-1", "stuck-2"} {
		st, err := c.Status(ctx, id)
		if err != nil || st.Status != StatusQueued || !strings.Contains(st.Error, "worker a shut down") {
			t.Fatalf("%s after shutdown: %+v %v", id, st, err)
		}
	}

	rb := newTestRunner()
	rb.release("never")
	startWorker(t, nc, Config{Runner: rb, WorkerID: "b", Concurrency: 3})
	for _, id := range []string{"stuck-1", "stuck-2"} {
		st := waitStatus(t, c, id)
		if st.Status != StatusSucceeded || st.Worker != "b" || st.Attempt != 2 {
			t.Errorf("%s: %+v", id, st)
		}
	}
	waitEmpty(t, nc, c)
	// No job lost, none completed twice.
	for _, id := range ids {
		watchEvents(t, c, id) // up to the terminal event
		done := streamMsgs(t, nc, c.names.EventsStream(), c.names.EventSubject(id, EventSucceeded))
		if len(done) != 1 {
			t.Errorf("%s succeeded %d times", id, len(done))
		}
		if ra.runCount(id)+rb.runCount(id) != map[string]int{"quick": 1, "stuck-1": 2, "stuck-2": 2}[id] {
			t.Errorf("%s ran %d+%d times", id, ra.runCount(id), rb.runCount(id))
		}
	}
	requeued := streamMsgs(t, nc, c.names.EventsStream(), c.names.EventSubject("*", EventRequeued))
	if len(requeued) != 2 {
		t.Errorf("%d requeued events, want 2", len(requeued))
	}
}

func TestConcurrencyLimitDoesNotBufferAhead(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	r := newTestRunner()
	startWorker(t, nc, Config{Runner: r, Concurrency: 2})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	for i := range 5 {
		if _, err := c.Submit(ctx, &Job{ID: fmt.Sprintf("j%d", i), Task: "gate:go"}); err != nil {
			t.Fatal(err)
		}
	}
	r.waitStarted(t, 2)
	// Two delivered and unacknowledged; three still on the server, none
	// pulled into a local buffer where their ack clocks would run.
	info, err := c.topo.JS.Consumer(ctx, c.names.JobsStream(), c.names.Consumer(DefaultQueue))
	if err != nil {
		t.Fatal(err)
	}
	// The consumer counts a stored message as pending a moment after the
	// publish is acknowledged (the server updates it on its own
	// goroutine), so wait until it counts all five.
	var ci *jetstream.ConsumerInfo
	pollUntil(t, "consumer counting the five jobs", func() bool {
		if ci, err = info.Info(ctx); err != nil {
			t.Fatal(err)
		}
		return ci.NumAckPending+int(ci.NumPending) >= 5
	})
	if ci.NumAckPending != 2 || ci.NumPending != 3 {
		t.Errorf("ack pending %d, pending %d; want 2 and 3", ci.NumAckPending, ci.NumPending)
	}
	r.release("go")
	for i := range 5 {
		if st := waitStatus(t, c, fmt.Sprintf("j%d", i)); st.Status != StatusSucceeded {
			t.Errorf("j%d: %+v", i, st)
		}
	}
	if p := r.peakConcurrency(); p != 2 {
		t.Errorf("peak concurrency %d, want 2", p)
	}
}

func TestTwoWorkersShareAQueue(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	r := newTestRunner() // shared, to see both workers' jobs at once
	startWorker(t, nc, Config{Runner: r, WorkerID: "w1", Concurrency: 1})
	startWorker(t, nc, Config{Runner: r, WorkerID: "w2", Concurrency: 1})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	for _, id := range []string{"a", "b"} {
		if _, err := c.Submit(ctx, &Job{ID: id, Task: "gate:hold"}); err != nil {
			t.Fatal(err)
		}
	}
	// Each worker runs one job at a time, so two running jobs means both
	// workers took one from the shared consumer.
	r.waitStarted(t, 2)
	sa, sb := waitStatus(t, c, "a", StatusRunning), waitStatus(t, c, "b", StatusRunning)
	if sa.Worker == sb.Worker {
		t.Fatalf("both jobs on %s", sa.Worker)
	}
	r.release("hold")
	const n = 20
	for i := range n {
		if _, err := c.Submit(ctx, &Job{ID: fmt.Sprintf("e%d", i), Task: "echo:x"}); err != nil {
			t.Fatal(err)
		}
	}
	by := map[string]int{}
	for i := range n {
		st := waitStatus(t, c, fmt.Sprintf("e%d", i))
		if st.Status != StatusSucceeded || r.runCount(st.ID) != 1 {
			t.Errorf("%s: %+v, ran %d times", st.ID, st, r.runCount(st.ID))
		}
		by[st.Worker]++
	}
	if by["w1"]+by["w2"] != n {
		t.Errorf("jobs by worker: %v", by)
	}
	t.Logf("jobs by worker: %v", by)
}

// TestPlainNATSClient submits and follows a job with nothing but nats.go,
// as `nats pub` / `nats sub` / `nats kv get` would.
func TestPlainNATSClient(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	startWorker(t, nc, Config{Runner: newTestRunner()})

	plain, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	tests := []struct {
		name string
		id   string
		msg  *nats.Msg
	}{
		{"id in the job", "plain-1", &nats.Msg{Subject: "agent.jobs.default", Data: []byte(`{"id":"plain-1","task":"echo:hi"}`)}},
		{"id in Nats-Msg-Id", "plain-2", &nats.Msg{Subject: "agent.jobs.default", Data: []byte(`{"task":"echo:hi"}`),
			Header: nats.Header{"Nats-Msg-Id": []string{"plain-2"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := make(chan *nats.Msg, 16)
			sub, err := plain.ChanSubscribe("agent.events."+tt.id+".>", events)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe() //nolint:errcheck
			if err := plain.PublishMsg(tt.msg); err != nil {
				t.Fatal(err)
			}
			var ev Event
			for ev.Type != "succeeded" {
				select {
				case m := <-events:
					if err := json.Unmarshal(m.Data, &ev); err != nil {
						t.Fatal(err)
					}
				case <-time.After(waitTimeout):
					t.Fatal("no succeeded event")
				}
			}
			var res Result
			if err := json.Unmarshal(ev.Data, &res); err != nil || res.Answer != "hi" {
				t.Fatalf("result %+v %v", res, err)
			}
			js, _ := jetstream.New(plain)
			kv, err := js.KeyValue(natstest.Context(t), "AGENT_STATE")
			if err != nil {
				t.Fatal(err)
			}
			e, err := kv.Get(natstest.Context(t), tt.id)
			if err != nil {
				t.Fatal(err)
			}
			var st State
			if err := json.Unmarshal(e.Value(), &st); err != nil || st.Status != StatusSucceeded {
				t.Fatalf("state %s %v", e.Value(), err)
			}
		})
	}
}

func TestCheckpointSurvivesRetry(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	var seen []string
	runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
		cp, err := env.LoadCheckpoint(ctx)
		if err != nil {
			return nil, err
		}
		seen = append(seen, string(cp))
		if env.Attempt() == 1 {
			if err := env.SaveCheckpoint(ctx, []byte("round 3")); err != nil {
				return nil, err
			}
			return nil, Retryable(fmt.Errorf("provider overloaded"))
		}
		return &Outcome{Result: agentloop.Result{Answer: "resumed from " + string(cp)}}, nil
	})
	startWorker(t, nc, Config{Runner: runner, Concurrency: 1})
	c := newClient(t, nc)
	if _, err := c.Submit(natstest.Context(t), &Job{ID: "cp", Task: "x"}); err != nil {
		t.Fatal(err)
	}
	// The terminal event comes after the checkpoint is deleted (which is
	// after the final state is stored): wait for it, not for the state.
	st, err := c.Watch(natstest.Context(t), "cp", func(Event) {})
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != StatusSucceeded || st.Result.Answer != "resumed from round 3" || st.Attempt != 2 {
		t.Fatalf("state %+v", st)
	}
	if len(seen) != 2 || seen[0] != "" || seen[1] != "round 3" {
		t.Errorf("checkpoints seen: %q", seen)
	}
	if _, err := c.topo.Transcripts.GetInfo(natstest.Context(t), CheckpointName("cp")); err == nil {
		t.Error("checkpoint kept after success")
	}
}
