package jobs

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestSubmitPublishFailureLeavesNoState: when the job cannot be published
// (here: larger than the server's max_payload, as a 1 MiB job is on a
// default external server), Submit fails and leaves no "queued" state
// behind that no message would ever settle.
func TestSubmitPublishFailureLeavesNoState(t *testing.T) {
	t.Parallel()
	s, err := StartEmbedded(EmbeddedConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0", MaxPayload: 4096})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx := natstest.Context(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureTopology(ctx, js, TopologyConfig{}, nil); err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(ctx, nc, ClientConfig{MaxJobBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Submit(ctx, &Job{ID: "too-big-for-nats", Task: strings.Repeat("x", 8<<10)})
	if err == nil || !strings.Contains(err.Error(), "maximum payload") {
		t.Fatalf("want a publish error, got %v", err)
	}
	if st, err := c.Status(ctx, "too-big-for-nats"); !errors.Is(err, ErrNotFound) {
		t.Errorf("state left behind: %+v, %v", st, err)
	}
	// The id is free for a submission that fits.
	rc, err := c.Submit(ctx, &Job{ID: "too-big-for-nats", Task: "fits"})
	if err != nil || rc.Duplicate || rc.State.Status != StatusQueued {
		t.Errorf("resubmit: %+v, %v", rc, err)
	}
}

// TestServedQueues: the queues with a shared consumer, sorted, and only
// those (QueueServed agrees).
func TestServedQueues(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, natstest.Start(t))
	ctx := natstest.Context(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureTopology(ctx, js, TopologyConfig{Queues: []string{"slow", "default", "fast"}}, nil); err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(ctx, nc, ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.ServedQueues(ctx)
	if err != nil || strings.Join(got, ",") != "default,fast,slow" {
		t.Fatalf("ServedQueues = %q, %v", got, err)
	}
	for q, want := range map[string]bool{"fast": true, "": true, "fats": false} {
		if served, err := c.QueueServed(ctx, q); err != nil || served != want {
			t.Errorf("QueueServed(%q) = %v, %v; want %v", q, served, err, want)
		}
	}
}
