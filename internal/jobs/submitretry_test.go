package jobs

import (
	"context"
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

// TestSubmitOwnsItsUnansweredTry: when a try's message was stored but its
// answer lost, the next try's ack says duplicate; the job is still this
// Submit's. It came back Duplicate with no sequence in the queued state,
// so a cancel while queued could not delete the message. A duplicate with
// no try of ours unanswered (the id published before by other means)
// stays a duplicate.
func TestSubmitOwnsItsUnansweredTry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		loseAnswer    bool // the first try is stored, its answer lost
		publishBefore bool // the id is in the stream already, published by hand
		wantDuplicate bool
	}{
		{name: "answer lost", loseAnswer: true},
		{name: "published before by hand", publishBefore: true, wantDuplicate: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			nc, topo := startTopology(t)
			ctx := natstest.Context(t)
			c, err := NewClient(ctx, nc, ClientConfig{})
			if err != nil {
				t.Fatal(err)
			}
			c.publishBound, c.publishTry = 10*time.Second, 5*time.Second
			var tries atomic.Int32
			real := c.publishMsg
			c.publishMsg = func(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
				ack, err := real(ctx, m, opts...)
				if tries.Add(1) == 1 && tt.loseAnswer && err == nil {
					return nil, context.DeadlineExceeded
				}
				return ack, err
			}
			var before uint64
			if tt.publishBefore {
				m := nats.NewMsg(c.Names().JobsSubject(DefaultQueue))
				m.Data = []byte(`{"id":"j1","task":"earlier"}`)
				ack, err := topo.JS.PublishMsg(ctx, m, jetstream.WithMsgID("j1"))
				if err != nil {
					t.Fatal(err)
				}
				before = ack.Sequence
			}
			r, err := c.Submit(ctx, &Job{ID: "j1", Task: "t"})
			if err != nil {
				t.Fatalf("Submit: %v", err)
			}
			if tt.loseAnswer && tries.Load() < 2 {
				t.Fatalf("%d tries, want a second after the lost answer", tries.Load())
			}
			if r.Duplicate != tt.wantDuplicate || r.Seq == 0 {
				t.Fatalf("receipt %+v, want duplicate %v with a sequence", r, tt.wantDuplicate)
			}
			if tt.publishBefore && r.Seq != before {
				t.Errorf("receipt seq %d, want the earlier message's %d", r.Seq, before)
			}
			st, err := c.Status(ctx, "j1")
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]uint64{false: r.Seq, true: 0}[tt.wantDuplicate]; st.StreamSeq != want {
				t.Errorf("queued state's stream seq %d, want %d", st.StreamSeq, want)
			}
			if tt.wantDuplicate {
				return
			}
			// Cancelled while queued, its message is deleted.
			if _, err := c.Cancel(ctx, "j1"); err != nil {
				t.Fatal(err)
			}
			s, err := topo.JS.Stream(ctx, c.Names().JobsStream())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.GetMsg(ctx, r.Seq); !errors.Is(err, jetstream.ErrMsgNotFound) {
				t.Errorf("message %d after cancel: %v, want deleted", r.Seq, err)
			}
		})
	}
}
