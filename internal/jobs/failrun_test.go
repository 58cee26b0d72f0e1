package jobs

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestFailRunRateLimits: a fetch failing every second (a node cut off
// from the quorum) logged "fetch failed" every second. A run of failures
// is now its first line, a summary a minute or when the error changes,
// and one line when it works again; the rest is at Debug.
func TestFailRunRateLimits(t *testing.T) {
	t.Parallel()
	recs, log := newRecords()
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := newFailRun(log, "fetch", "queue", "default")
	f.now = func() time.Time { return clock }
	gone, leader := errors.New("nats: no responders available for request"), errors.New("leadership change")
	step := func(err error) {
		clock = clock.Add(time.Second)
		if err != nil {
			f.fail(err)
		} else {
			f.ok()
		}
	}
	step(nil) // working: nothing to say
	for range 90 {
		step(gone)
	}
	step(leader)
	step(leader)
	step(nil)
	step(nil)
	step(gone)
	step(nil)
	got := recs.atLeast(slog.LevelInfo)
	want := []string{
		"WARN fetch failed queue=default err=" + gone.Error(),
		"WARN fetch still failing queue=default failures=61 for=1m0s err=" + gone.Error(),
		"WARN fetch still failing queue=default failures=91 for=1m30s err=" + leader.Error(),
		"INFO fetch works again queue=default failures=92 for=1m32s",
		"WARN fetch failed queue=default err=" + gone.Error(),
		"INFO fetch works again queue=default failures=1 for=1s",
	}
	if !slices.Equal(got, want) {
		t.Errorf("logged\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := len(recs.all()) - len(got); n != 93-len(want)+2 {
		t.Errorf("%d lines at Debug, want the other failures", n)
	}
}

// TestFetchFailuresLoggedOnce: a worker whose fetches fail for a while
// (here its connection moved to a server without JetStream, so every
// request finds no responders, as on a node whose JetStream cannot
// answer) logs the first failure, not one a FetchWait, and one line when
// its fetches work again.
func TestFetchFailuresLoggedOnce(t *testing.T) {
	t.Parallel()
	js := startServer(t)
	opts := natstest.Options("")
	opts.JetStream = false
	plain := natstest.StartWith(t, opts)
	var target atomic.Value
	target.Store(js.Addr().String())
	p := startRouteProxy(t, func() string { return target.Load().(string) })
	nc, err := nats.Connect(p.url(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})) // the moves break writes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	recs, log := newRecords()
	startWorker(t, nc, Config{Runner: newTestRunner(), Logger: log})
	moveTo := func(s *server.Server) {
		target.Store(s.Addr().String())
		p.closeAll() // the connection comes back through the proxy, to s
	}
	count := func(lines []string, prefix string) int {
		n := 0
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				n++
			}
		}
		return n
	}
	moveTo(plain)
	recs.waitFor(t, "six failed fetches", func(l []string) bool {
		return count(l, "WARN fetch failed queue=default")+count(l, "DEBUG fetch failed queue=default") >= 6
	})
	if l := recs.all(); count(l, "WARN fetch failed queue=default") != 1 {
		t.Fatalf("%d lines 'fetch failed' at Warn, want 1:\n%s", count(l, "WARN fetch failed queue=default"), strings.Join(l, "\n"))
	}
	moveTo(js)
	recs.waitFor(t, "working fetches", func(l []string) bool { return count(l, "INFO fetch works again queue=default") == 1 })
}
