package jobs

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestTransitionsUseHeldRevision: a job's run reads its state once (the
// claim's check for a live attempt) and then writes against the revision
// it holds: the claim and the final state are two compare-and-swaps with
// no read before either. Submit reads once and creates the state.
func TestTransitionsUseHeldRevision(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	spy := natstest.Connect(t, s)
	r := newTestRunner()
	startWorker(t, nc, Config{Runner: r})
	c := newClient(t, nc)
	bucket := c.names.StateBucket()
	var reads, writes atomic.Int64
	for _, subj := range []string{"$JS.API.DIRECT.GET.KV_" + bucket + ".>", "$JS.API.DIRECT.GET.KV_" + bucket, "$JS.API.STREAM.MSG.GET.KV_" + bucket} {
		if _, err := spy.Subscribe(subj, func(m *nats.Msg) {
			if strings.HasSuffix(m.Subject, ".held") || strings.Contains(string(m.Data), ".held") {
				reads.Add(1)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := spy.Subscribe("$KV."+bucket+".held", func(*nats.Msg) { writes.Add(1) }); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(natstest.Context(t), &Job{ID: "held", Task: "echo:x"}); err != nil {
		t.Fatal(err)
	}
	if st := waitStatus(t, c, "held"); st.Status != StatusSucceeded {
		t.Fatalf("state %+v", st)
	}
	// The final state is the run's last state operation (the spy's
	// subscriptions saw each before the server's reply to it).
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	// Submit: a read and the create; the worker: one read, two writes.
	if reads.Load() != 2 || writes.Load() != 3 {
		t.Errorf("state reads %d, writes %d; want 2 and 3", reads.Load(), writes.Load())
	}
}
