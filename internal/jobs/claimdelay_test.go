package jobs

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestClaimRetriesDouble: a job whose claim fails (the store full) is
// handed back after a delay that doubles per delivery, as
// JETAGENT_RETRY_DELAY says ("doubles per attempt"). It was the fixed
// first delay, so a full store spent a job's five deliveries in about 8
// seconds (seen end to end with bin/worker: attempts 2 to 5 two seconds
// apart).
func TestClaimRetriesDouble(t *testing.T) {
	t.Parallel()
	topo := TopologyConfig{AckWait: 5 * time.Second, MaxDeliver: 4}
	nc, js, ctx := smallStore(t, topo)
	c := newClient(t, nc)
	if _, err := c.Submit(ctx, &Job{ID: "claim-delays", Task: "echo:x"}); err != nil {
		t.Fatal(err)
	}
	fillStore(t, ctx, js)
	rec, log := newRecordLog()
	startWorker(t, nc, Config{Runner: newTestRunner(), WorkerID: "w1", Logger: log, Topology: topo,
		RetryDelay: 300 * time.Millisecond, RetryDelayMax: 10 * time.Second, ShutdownGrace: time.Second})
	// The first three deliveries are handed back, the fourth (the last) is
	// kept: when each claim failed, seen here.
	var seen []time.Time
	for len(seen) < 4 {
		rec.mu.Lock()
		n := 0
		for _, l := range rec.lines {
			if strings.HasPrefix(l, "claim failed") || strings.HasPrefix(l, "the job's last delivery cannot be settled") {
				n++
			}
		}
		lines, added := strings.Join(rec.lines, "\n"), rec.added
		rec.mu.Unlock()
		for len(seen) < min(n, 4) {
			seen = append(seen, time.Now())
		}
		if len(seen) >= 4 {
			break
		}
		select {
		case <-added:
		case <-ctx.Done():
			t.Fatalf("claims did not fail four times; log:\n%s", lines)
		}
	}
	// Delays 300ms, 600ms, 1.2s (each within 20%, the jitter); at a fixed
	// delay the last gap was as long as the first. Measured here, on a
	// busy machine, the gaps are rough: the delays logged are exact.
	first, last := seen[1].Sub(seen[0]), seen[3].Sub(seen[2])
	if last*2 < first*3 {
		t.Errorf("gaps between claims: first %s, last %s; want the last at least 1.5 times the first", first, last)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var logged []time.Duration
	for _, l := range rec.lines {
		if m := claimDelayLogged.FindStringSubmatch(l); m != nil {
			d, err := time.ParseDuration(m[1])
			if err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			logged = append(logged, d)
		}
	}
	if len(logged) < 3 || logged[1] <= logged[0] || logged[2] <= logged[1] {
		t.Errorf("hand-back delays logged %v, want three growing", logged)
	}
}

var claimDelayLogged = regexp.MustCompile(`^claim failed; handing the job back .* in=(\S+)`)
