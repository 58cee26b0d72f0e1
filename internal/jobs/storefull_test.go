package jobs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// smallStore starts a server whose JetStream store holds 4 MiB, so that a
// test can fill it, with the jobs topology ensured on it.
func smallStore(t *testing.T, topo TopologyConfig) (*nats.Conn, jetstream.JetStream, context.Context) {
	t.Helper()
	o := natstest.Options(t.TempDir())
	o.JetStreamMaxStore = 4 << 20
	nc := natstest.Connect(t, natstest.StartWith(t, o))
	ctx := natstest.Context(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureTopology(ctx, js, topo, t.Logf); err != nil {
		t.Fatal(err)
	}
	return nc, js, ctx
}

// fillStore fills the store of a smallStore server, as another tenant
// would, with a stream FILL of 256 KiB messages; deleting it makes room.
func fillStore(t *testing.T, ctx context.Context, js jetstream.JetStream) jetstream.Stream {
	t.Helper()
	fill, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FILL", Subjects: []string{"fill"}})
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 256<<10)
	for i := 0; ; i++ {
		_, err := js.Publish(ctx, "fill", chunk)
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == jsInsufficientResources {
			return fill
		}
		if err != nil || i > 100 {
			t.Fatalf("filling the store: %d messages, then %v", i, err)
		}
	}
}

// A server whose JetStream store is full (max_file_store reached by
// another stream) refuses every write: a job's claim fails, and each
// failure handed the delivery back, so the job's deliveries ran out in
// seconds. The last one was the end of it: the server's max-deliveries
// advisory, the dead-letter safety net, was refused by the full store as
// well, and once an operator freed room the job stayed queued for ever
// (or running, when an attempt had begun), with its message in the
// stream and no dead letter (a probe with a stock nats-server). The last
// delivery is now kept, and claimed once the store has room again.
func TestLastDeliveryKeptWhileTheStoreIsFull(t *testing.T) {
	t.Parallel()
	topo := TopologyConfig{AckWait: 2 * time.Second, MaxDeliver: 2}
	nc, js, ctx := smallStore(t, topo)
	c := newClient(t, nc)
	const id = "full-1"
	if _, err := c.Submit(ctx, &Job{ID: id, Task: "echo:done"}); err != nil {
		t.Fatal(err)
	}
	// Another tenant fills the store.
	fill := fillStore(t, ctx, js)
	rec, log := newRecordLog()
	r := newTestRunner()
	startWorker(t, nc, Config{Runner: r, WorkerID: "w1", Logger: log, Topology: topo})
	// Both deliveries failed to claim the job: the first handed back, the
	// last kept (before: handed back too).
	failed := func(l string) bool {
		return strings.Contains(l, "claim failed") || strings.Contains(l, "last delivery cannot be settled")
	}
	for {
		rec.mu.Lock()
		n, added := 0, rec.added
		for _, l := range rec.lines {
			if failed(l) {
				n++
			}
		}
		lines := strings.Join(rec.lines, "\n")
		rec.mu.Unlock()
		if n >= 2 {
			break
		}
		select {
		case <-added:
		case <-ctx.Done():
			t.Fatalf("the claims did not fail; log:\n%s", lines)
		}
	}
	if r.runCount(id) != 0 {
		t.Fatal("the job ran with the store full")
	}
	// The operator frees room.
	if err := js.DeleteStream(ctx, fill.CachedInfo().Config.Name); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := c.states.wait(wctx, id, func(s *State) bool { return s.Status.Terminal() })
	if err != nil {
		cur, _, _ := c.states.get(ctx, id)
		t.Fatalf("the job did not end once the store had room (state %+v): %v", cur, err)
	}
	if st.Status != StatusSucceeded || st.Attempt != 2 {
		t.Errorf("state %s attempt %d (%s), want succeeded attempt 2", st.Status, st.Attempt, st.Error)
	}
	if n := r.runCount(id); n != 1 {
		t.Errorf("ran %d times", n)
	}
	if dls := streamMsgs(t, nc, c.names.DLQStream(), ""); len(dls) != 0 {
		t.Errorf("%d dead letters", len(dls))
	}
}

// "job dead-lettered" is logged only once the dead letter is stored: while
// the store is full, the max-deliveries advisory's copy fails, the log
// says it will be retried, and the job's message stays; with room again
// the copy goes through and only then is the job logged dead-lettered.
func TestDeadLetteredLoggedOnlyOnceStored(t *testing.T) {
	t.Parallel()
	topo := TopologyConfig{AckWait: time.Second, MaxDeliver: 2}
	nc, js, ctx := smallStore(t, topo)
	c := newClient(t, nc)
	const id = "poison-full"
	if _, err := c.Submit(ctx, &Job{ID: id, Task: "echo:x"}); err != nil {
		t.Fatal(err)
	}
	ensured, err := EnsureTopology(ctx, js, topo, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Two deliveries never acknowledged: a worker that crashes on the job,
	// twice; the server stores its max-deliveries advisory when a pull
	// request would have had it a third time.
	cons := ensured.Consumers[DefaultQueue]
	for range 2 {
		fetchOne(t, cons)
	}
	for {
		info, err := ensured.Advisories.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs > 0 {
			break
		}
		if _, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	fill := fillStore(t, ctx, js)
	rec, log := newRecordLog()
	startWorker(t, nc, Config{Runner: newTestRunner(), WorkerID: "w1", Logger: log, Topology: topo})
	if _, err := rec.wait(ctx, "dead-lettering after max deliveries failed"); err != nil {
		t.Fatalf("the copy did not fail with the store full: %v", err)
	}
	rec.mu.Lock()
	for _, l := range rec.lines {
		if strings.Contains(l, "job dead-lettered") {
			t.Errorf("logged %q while the store was full", l)
		}
	}
	rec.mu.Unlock()
	if err := js.DeleteStream(ctx, fill.CachedInfo().Config.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.wait(ctx, "job dead-lettered"); err != nil {
		t.Fatalf("not dead-lettered once the store had room: %v", err)
	}
	if dls := streamMsgs(t, nc, c.names.DLQStream(), ""); len(dls) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dls))
	}
	if st := waitStatus(t, c, id); st.Status != StatusDead {
		t.Errorf("state %s, want dead", st.Status)
	}
}
