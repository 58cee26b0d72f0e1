package jobs

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestTransitionsUseHeldRevision: a job's run reads its state once (the
// claim's check for a live attempt) and then writes against the revision
// it holds: the claim and the final state are two compare-and-swaps with
// no read before either. Submit reads once, creates the state and writes
// the message's stream sequence into it against the revision it created.
// The worker starts after the submit, so the two parties' writes do not
// race (either would then read again).
func TestTransitionsUseHeldRevision(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	spy := natstest.Connect(t, s)
	r := newTestRunner()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureTopology(natstest.Context(t), js, testTopology(), t.Logf); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, nc)
	bucket := c.names.StateBucket()
	// Channel subscriptions: nats.go puts each message in the channel in
	// its read loop, before it reads the reply to a later flush, so after
	// spy.Flush every operation the server had routed is in a channel. An
	// async handler runs later, on the subscription's own goroutine, and
	// under load had not yet counted the last operations at the check.
	reads, writes := make(chan *nats.Msg, 256), make(chan *nats.Msg, 256)
	for _, subj := range []string{"$JS.API.DIRECT.GET.KV_" + bucket + ".>", "$JS.API.DIRECT.GET.KV_" + bucket, "$JS.API.STREAM.MSG.GET.KV_" + bucket} {
		if _, err := spy.ChanSubscribe(subj, reads); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := spy.ChanSubscribe("$KV."+bucket+".held", writes); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(natstest.Context(t), &Job{ID: "held", Task: "echo:x"}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, nc, Config{Runner: r})
	if st := waitStatus(t, c, "held"); st.Status != StatusSucceeded {
		t.Fatalf("state %+v", st)
	}
	// The final state is the run's last state operation (the spy's
	// subscriptions saw each before the server's reply to it).
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	count := func(ch chan *nats.Msg, match func(*nats.Msg) bool) int {
		for n := 0; ; {
			select {
			case m := <-ch:
				if match(m) {
					n++
				}
			default:
				return n
			}
		}
	}
	nreads := count(reads, func(m *nats.Msg) bool {
		return strings.HasSuffix(m.Subject, ".held") || strings.Contains(string(m.Data), ".held")
	})
	nwrites := count(writes, func(*nats.Msg) bool { return true })
	// Submit: a read, the create and the sequence; the worker: one read,
	// two writes.
	if nreads != 2 || nwrites != 4 {
		t.Errorf("state reads %d, writes %d; want 2 and 4", nreads, nwrites)
	}
}
