package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// A worker that stops takes no job just to hand it back: each such
// delivery spent one of the job's MaxDeliver deliveries (and its
// RequeueDelay) for nothing.
func TestStoppingWorkerTakesNoJob(t *testing.T) {
	t.Parallel()

	// An idle worker's long poll ends as it stops: a job published then is
	// left on the server, not delivered into the open poll and handed
	// back. The poll used to stay open for the whole FetchWait (here an
	// hour: the worker did not stop).
	t.Run("idle long poll", func(t *testing.T) {
		t.Parallel()
		nc := natstest.Connect(t, startServer(t))
		ctx := natstest.Context(t)
		w, stop := startWorker(t, nc, Config{Runner: newTestRunner(), Concurrency: 1, FetchWait: time.Hour})
		c := newClient(t, nc)
		cons := w.topo.Consumers[DefaultQueue]
		waitWaiting(t, nc, cons, 1) // the poll is open
		stopped := make(chan struct{})
		go func() { stop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(waitTimeout):
			t.Fatal("the worker did not stop within the wait: its long poll outlived the shutdown")
		}
		waitWaiting(t, nc, cons, 0) // the server knows the poll is gone
		if _, err := c.Submit(ctx, &Job{ID: "after-stop", Task: "echo:x"}); err != nil {
			t.Fatal(err)
		}
		m, err := cons.Next(jetstream.FetchMaxWait(waitTimeout))
		if err != nil {
			t.Fatal(err)
		}
		if md, err := m.Metadata(); err != nil || md.NumDelivered != 1 {
			t.Fatalf("the job's delivery %+v (%v), want its first: the stopped worker took one", md, err)
		}
	})

	// A slot freed just as the worker stops starts no fetch: with both
	// ready, select picked either, and a fetch took a queued job only to
	// hand it back.
	t.Run("slot freed while stopping", func(t *testing.T) {
		t.Parallel()
		nc := natstest.Connect(t, startServer(t))
		ctx := natstest.Context(t)
		w, err := NewWorker(Config{Conn: nc, Runner: newTestRunner(), Topology: testTopology(), Concurrency: 1,
			FetchWait: 200 * time.Millisecond, RequeueDelay: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		topo, err := EnsureTopology(ctx, js, testTopology(), nil) // what Run would create
		if err != nil {
			t.Fatal(err)
		}
		c := newClient(t, nc)
		if _, err := c.Submit(ctx, &Job{ID: "queued", Task: "echo:x"}); err != nil {
			t.Fatal(err)
		}
		cons := topo.Consumers[DefaultQueue]
		stopped, cancel := context.WithCancel(ctx)
		cancel()
		for range 30 { // a random select picked the slot in about half of them
			w.fetchLoop(stopped, DefaultQueue, cons)
		}
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.Delivered.Consumer != 0 {
			t.Fatalf("a stopped fetch loop delivered the job %d times", info.Delivered.Consumer)
		}
	})
}

// waitWaiting waits until the consumer has n pull requests waiting (the
// server drops one whose subscription is gone), paced by NATS round trips.
func waitWaiting(t *testing.T, nc *nats.Conn, c jetstream.Consumer, n int) {
	t.Helper()
	ctx := natstest.Context(t)
	for {
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatalf("waiting for %d pull requests: %v", n, err)
		}
		if info.NumWaiting == n {
			return
		}
		if err := nc.FlushWithContext(ctx); err != nil {
			t.Fatalf("waiting for %d pull requests (%d now): %v", n, info.NumWaiting, err)
		}
	}
}
