package jobs

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestSubmitRetriesAnUnreachableStream: a publish that finds no stream to
// answer it (a cluster node restarting, its group without a leader) is
// sent again until the stream is back, within the bound. In a three-node
// cluster with its leader killed, a batch's jobs failed "no response from
// stream" at the first try.
func TestSubmitRetriesAnUnreachableStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// back, when set, restores the stream after the first failed try.
		back    func(t *testing.T, js jetstream.JetStream)
		wantErr bool
	}{
		{
			name: "back after a try",
			back: func(t *testing.T, js jetstream.JetStream) {
				t.Helper()
				if _, err := EnsureTopology(natstest.Context(t), js, testTopology(), nil); err != nil {
					t.Error(err)
				}
			},
		},
		{name: "gone for good", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			nc, topo := startTopology(t)
			js := topo.JS
			c, err := NewClient(natstest.Context(t), nc, ClientConfig{})
			if err != nil {
				t.Fatal(err)
			}
			c.publishBound, c.publishTry = 3*time.Second, time.Second
			stream := c.Names().JobsStream()
			if err := js.DeleteStream(natstest.Context(t), stream); err != nil {
				t.Fatal(err)
			}
			var failed atomic.Int32
			c.onPublishTry = func(err error) {
				if err != nil && failed.Add(1) == 1 && tt.back != nil {
					tt.back(t, js)
				}
			}
			r, err := c.Submit(natstest.Context(t), &Job{ID: "j1", Task: "t"})
			if tt.wantErr {
				if !errors.Is(err, jetstream.ErrNoStreamResponse) {
					t.Fatalf("Submit: %v, want no response from stream", err)
				}
				if failed.Load() < 2 {
					t.Errorf("%d tries, want more than one", failed.Load())
				}
				if _, err := c.Status(natstest.Context(t), "j1"); !errors.Is(err, ErrNotFound) {
					t.Errorf("state after a failed submit: %v, want not found", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Submit: %v", err)
			}
			if failed.Load() == 0 {
				t.Fatal("no try failed: the stream was never unreachable")
			}
			if r.Seq == 0 || r.Duplicate {
				t.Errorf("receipt %+v, want a new job with its sequence", r)
			}
			s, err := js.Stream(natstest.Context(t), stream)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := s.GetMsg(natstest.Context(t), r.Seq); err != nil || got.Header.Get(nats.MsgIdHdr) != "j1" {
				t.Errorf("stream message %d: %v, %v, want j1", r.Seq, got, err)
			}
		})
	}
}
