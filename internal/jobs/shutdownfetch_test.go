package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/natstest"
)

// A slot freed just as the worker stops starts no fetch: with both ready,
// select picked either, and a fetch took a queued job only to hand it
// back, spending one of its MaxDeliver deliveries (and its RequeueDelay)
// for nothing. (A job that comes in the idle poll open as the worker
// stops still is: see the comment at the poll in fetchLoop.)
func TestStoppingWorkerTakesNoJob(t *testing.T) {
	t.Parallel()
	nc, topo := startTopology(t)
	ctx := natstest.Context(t)
	w, err := NewWorker(Config{Conn: nc, Runner: newTestRunner(), Topology: testTopology(), Concurrency: 1,
		FetchWait: 200 * time.Millisecond, RequeueDelay: time.Millisecond})
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
}
