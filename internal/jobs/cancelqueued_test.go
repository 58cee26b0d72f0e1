package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestCancelQueuedDropsItsMessage: a job cancelled while queued has its
// message deleted from the jobs stream. It used to stay there until a
// worker of its queue took it: forever on a queue no worker serves, where
// every worker kept logging and counting it as a job waiting
// (jetagent_jobs_unserved) although its state said cancelled. The delete
// races safely with a worker that has just taken the message: that worker
// reads the cancelled state when it claims the job and acks it unrun.
func TestCancelQueuedDropsItsMessage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		// taken: a worker of the queue fetched the message before the
		// cancel and handles it after (its claim comes second)
		taken bool
		// early: the cancel comes between Submit's state and its publish
		early bool
	}{
		{name: "unserved queue"},
		{name: "taken by a worker that has not claimed it yet", taken: true},
		{name: "cancelled before the publish", early: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			nc := natstest.Connect(t, s)
			r := newTestRunner()
			// The worker serves "default" only; the jobs go to "idle".
			w, _ := startWorker(t, nc, Config{Runner: r, UnservedCheck: -1})
			c := newClient(t, nc)
			ctx := natstest.Context(t)
			const queue, id = "idle", "cancel-me"
			var held jetstream.Msg
			var seq uint64
			switch {
			case tt.early:
				// What Client.Submit writes, then a cancel, then its publish.
				if _, err := c.states.update(ctx, id, func(*State) (*State, error) {
					return &State{ID: id, Queue: queue, Status: StatusQueued, Task: "echo:no", CreatedAt: time.Now().UTC()}, nil
				}); err != nil {
					t.Fatal(err)
				}
				if st, err := c.Cancel(ctx, id); err != nil || st.Status != StatusCancelled {
					t.Fatalf("cancel: %v, %v", st, err)
				}
				ack, err := c.topo.JS.Publish(ctx, c.names.JobsSubject(queue), mustJSON(&Job{ID: id, Task: "echo:no", Queue: queue}),
					jetstream.WithMsgID(id))
				if err != nil {
					t.Fatal(err)
				}
				if c.recordSeq(ctx, id, queue, ack.Sequence) != nil {
					t.Error("recordSeq wrote the sequence into a cancelled state")
				}
			default:
				rc, err := c.Submit(ctx, &Job{ID: id, Task: "echo:no", Queue: queue})
				if err != nil {
					t.Fatal(err)
				}
				seq = rc.Seq
				if st := waitStatus(t, c, id, StatusQueued); st.StreamSeq != seq {
					t.Fatalf("queued state has stream_seq %d; want %d, the message's", st.StreamSeq, seq)
				}
				if waiting, err := w.unservedQueues(ctx); err != nil || waiting[queue] != 1 {
					t.Fatalf("before the cancel: unserved %v, %v; want 1 on %s", waiting, err, queue)
				}
				if tt.taken {
					// The queue's consumer, as a worker of it would use it.
					topo, err := EnsureTopology(ctx, c.topo.JS, TopologyConfig{AckWait: 2 * time.Second, MaxDeliver: 3,
						Queues: []string{queue}}, t.Logf)
					if err != nil {
						t.Fatal(err)
					}
					batch, err := topo.Consumers[queue].Fetch(1, jetstream.FetchMaxWait(waitTimeout))
					if err != nil {
						t.Fatal(err)
					}
					for m := range batch.Messages() {
						held = m
					}
					if held == nil {
						t.Fatalf("no delivery: %v", batch.Error())
					}
				}
				st, err := c.Cancel(ctx, id)
				if err != nil || st.Status != StatusCancelled {
					t.Fatalf("cancel: %+v, %v", st, err)
				}
			}
			info, err := c.topo.Jobs.Info(ctx, jetstream.WithSubjectFilter(c.names.JobsSubject(queue)))
			if err != nil {
				t.Fatal(err)
			}
			if n := info.State.Subjects[c.names.JobsSubject(queue)]; n != 0 || info.State.Msgs != 0 {
				t.Errorf("the cancelled job's message is still in %s (%d on its queue, %d in all)", c.names.JobsStream(), n, info.State.Msgs)
			}
			if waiting, err := w.unservedQueues(ctx); err != nil || len(waiting) != 0 {
				t.Errorf("after the cancel: unserved %v, %v; want none", waiting, err)
			}
			if held != nil {
				// The worker that took it handles it now: its claim finds
				// the job cancelled, so it neither runs it nor writes.
				w.handle(queue, held)
				if n := r.runCount(id); n != 0 {
					t.Errorf("the cancelled job ran %d times", n)
				}
			}
			if st, err := c.Status(ctx, id); err != nil || st.Status != StatusCancelled {
				t.Errorf("state %+v, %v; want cancelled", st, err)
			}
			// No dead letter either: the job was cancelled, not refused.
			if msgs := streamMsgs(t, nc, c.names.DLQStream(), ""); len(msgs) != 0 {
				t.Errorf("%d dead letters", len(msgs))
			}
		})
	}
}

// TestCancelRunningKeepsItsMessage: a job a worker claimed is not deleted
// by a cancel: it gets cancel_requested, and the worker settles it.
func TestCancelRunningKeepsItsMessage(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	r := newTestRunner()
	startWorker(t, nc, Config{Runner: r})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	rc, err := c.Submit(ctx, &Job{ID: "running", Task: "block"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitStarted(t, 1)
	cctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	st, err := c.Cancel(cctx, rc.ID)
	if err != nil || st.Status != StatusCancelled || st.Error != "cancelled on request" || st.Attempt != 1 {
		t.Fatalf("cancel: %+v, %v; want cancelled on request by its attempt", st, err)
	}
}
