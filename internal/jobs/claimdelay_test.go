package jobs

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// TestClaimRetriesDouble: a job whose claim fails (the store full) is
// handed back after a delay that doubles per delivery, as
// JETAGENT_RETRY_DELAY says ("doubles per attempt"). It was the fixed
// first delay, so a full store spent a job's five deliveries in about 8
// seconds (seen end to end with bin/worker: attempts 2 to 5 two seconds
// apart); then it grew by half, not double, per delivery (the backoff
// library's default multiplier).
//
// Each hand-back is checked against its own delivery's number, from the
// log record, and the next delivery's claim must come no sooner than the
// delay: on a loaded machine a delivery can be lost to a pull request
// that expired (the server counts it, then redelivers after the ack
// wait), so neither the count of hand-backs nor wall-clock gaps between
// them are fixed (seen under load: deliveries 1 and 3 handed back, 6 s
// apart).
func TestClaimRetriesDouble(t *testing.T) {
	t.Parallel()
	topo := TopologyConfig{AckWait: 5 * time.Second, MaxDeliver: 5}
	nc, js, ctx := smallStore(t, topo)
	c := newClient(t, nc)
	if _, err := c.Submit(ctx, &Job{ID: "claim-delays", Task: "echo:x"}); err != nil {
		t.Fatal(err)
	}
	fillStore(t, ctx, js)
	log := newClaimLog()
	const first = 300 * time.Millisecond
	startWorker(t, nc, Config{Runner: newTestRunner(), WorkerID: "w1", Logger: slog.New(log), Topology: topo,
		RetryDelay: first, RetryDelayMax: 10 * time.Second, ShutdownGrace: time.Second})
	select {
	case <-log.last: // the last delivery: kept, not handed back
	case <-ctx.Done():
		t.Fatal("the job's last delivery was not reached")
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.backs) < 2 {
		t.Fatalf("%d hand-backs logged (%+v); want at least two of the first %d deliveries", len(log.backs), log.backs, topo.MaxDeliver-1)
	}
	for i, b := range log.backs {
		want := first << (b.attempt - 1) // 300ms, 600ms, 1.2s, 2.4s
		if lo, hi := want*8/10, want*12/10; b.delay < lo || b.delay > hi {
			t.Errorf("delivery %d handed back for %s; want %s within 20%% (the jitter)", b.attempt, b.delay, want)
		}
		if i > 0 && b.attempt <= log.backs[i-1].attempt {
			t.Errorf("hand-backs of deliveries %d then %d", log.backs[i-1].attempt, b.attempt)
		}
	}
	// The server holds a handed-back delivery for its delay: the next
	// claim is at least that much later.
	claims := append(log.backs, log.keptAt)
	for i := 1; i < len(claims); i++ {
		prev := claims[i-1]
		if gap := claims[i].at.Sub(prev.at); gap < prev.delay {
			t.Errorf("delivery %d claimed %s after delivery %d was handed back for %s", claims[i].attempt, gap, prev.attempt, prev.delay)
		}
	}
}

// claimLog records the claim failures a worker logs, with the delivery
// number of each (the attempt its job logger carries) and its time.
type claimLog struct {
	*claims
	attrs []slog.Attr // of the logger (With)
}

// claims is what every logger derived from a claimLog records.
type claims struct {
	mu     sync.Mutex
	backs  []claimFailure // "claim failed; handing the job back"
	keptAt claimFailure   // the first "the job's last delivery cannot be settled"
	last   chan struct{}  // closed with keptAt
}

type claimFailure struct {
	attempt int
	delay   time.Duration
	at      time.Time
}

func newClaimLog() *claimLog { return &claimLog{claims: &claims{last: make(chan struct{})}} }

func (h *claimLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *claimLog) WithGroup(string) slog.Handler            { return h }

func (h *claimLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &claimLog{claims: h.claims, attrs: append(append([]slog.Attr{}, h.attrs...), as...)}
}

func (h *claimLog) Handle(_ context.Context, rec slog.Record) error {
	f := claimFailure{at: rec.Time}
	note := func(a slog.Attr) bool {
		switch a.Key {
		case "attempt":
			f.attempt = int(a.Value.Int64())
		case "in":
			f.delay = a.Value.Duration()
		}
		return true
	}
	for _, a := range h.attrs {
		note(a)
	}
	rec.Attrs(note)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch rec.Message {
	case "claim failed; handing the job back":
		h.backs = append(h.backs, f)
	case "the job's last delivery cannot be settled; keeping it and trying again":
		if h.keptAt.attempt == 0 {
			h.keptAt = f
			close(h.last)
		}
	}
	return nil
}
