package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// lostTerm is a delivery whose Term a killed nats-server lost: the
// worker's term is never stored, so the server hands the message out again.
type lostTerm struct{ jetstream.Msg }

func (lostTerm) Term() error                 { return nil }
func (lostTerm) TermWithReason(string) error { return nil }

// losingKV is a state bucket whose next Create fails once lose is set: a
// write a restarting server never took.
type losingKV struct {
	jetstream.KeyValue
	lose atomic.Bool
}

func (k *losingKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	if k.lose.CompareAndSwap(true, false) {
		return 0, fmt.Errorf("create %s: %w", key, context.DeadlineExceeded)
	}
	return k.KeyValue.Create(ctx, key, value, opts...)
}

// TestRedeliveredRejectHasOneDeadEvent: a job refused at the door is
// dead-lettered, marked dead and given its dead event; a nats-server
// SIGKILLed right after lost the term (so the job was delivered again),
// and with it, or not, the dead state or the dead event. The redelivery,
// refused again, published a second dead event (under its own attempt's
// message id, which the duplicate window does not drop): a job had two
// terminal events. It now publishes the dead event only when the events
// stream has none for the job (under the lost one's message id), and a
// lost state is rebuilt from the dead event that survived it (also by a
// later try when the first write of it was lost).
func TestRedeliveredRejectHasOneDeadEvent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name                            string
		loseState, loseEvent, loseWrite bool
	}{
		{"term lost", false, false, false},
		{"term and state lost", true, false, false},
		{"term and event lost", false, true, false},
		{"term and state lost, a rebuilt state's write lost", true, false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			nc := natstest.Connect(t, s)
			kv := &losingKV{}
			w, _ := startWorkerWith(t, nc, Config{Runner: newTestRunner(), UnservedCheck: -1}, func(w *Worker) {
				w.stateKV = func(b jetstream.KeyValue) jetstream.KeyValue { kv.KeyValue = b; return kv }
			})
			c := newClient(t, nc)
			ctx := natstest.Context(t)
			const queue, id = "door", "dead-twice"
			// The worker does not take this queue: the test hands it the
			// deliveries, as the server would.
			topo, err := EnsureTopology(ctx, c.topo.JS, TopologyConfig{AckWait: 2 * time.Second, MaxDeliver: 3, Queues: []string{queue}}, t.Logf)
			if err != nil {
				t.Fatal(err)
			}
			ack, err := c.topo.JS.Publish(ctx, c.names.JobsSubject(queue), []byte(`{"id":"`+id+`","task":"t","colour":"red"}`))
			if err != nil {
				t.Fatal(err)
			}
			deliver := func() jetstream.Msg { return fetchOne(t, topo.Consumers[queue]) }

			first := deliver()
			if tt.loseEvent {
				// What a worker killed before the dead event did: the
				// dead letter and the dead state. (An event purged after
				// its publish would stay in the duplicate window, unlike
				// one a killed server lost.)
				if err := w.deadLetter(ctx, queue, id, ack.Sequence, first.Data(), first.Headers(), "refused"); err != nil {
					t.Fatal(err)
				}
				res := &Result{ID: id, Queue: queue, Status: StatusDead, Error: "refused", Attempt: 1, Worker: "killed"}
				if _, err := c.states.update(ctx, id, func(*State) (*State, error) {
					return &State{Queue: queue, Status: StatusDead, Error: res.Error, Result: res, Attempt: 1, Worker: "killed",
						StreamSeq: ack.Sequence, FinishedAt: time.Now().UTC()}, nil
				}); err != nil {
					t.Fatal(err)
				}
			} else {
				w.handle(queue, lostTerm{first})
			}
			if st := waitStatus(t, c, id); st.Status != StatusDead || st.Attempt != 1 {
				t.Fatalf("state after the first delivery %+v; want dead on attempt 1", st)
			}
			if tt.loseState {
				if err := c.topo.State.Purge(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			kv.lose.Store(tt.loseWrite)
			_ = first.Nak() // the term was lost: the server delivers it again
			second := deliver()
			if md, _ := second.Metadata(); md == nil || md.NumDelivered != 2 {
				t.Fatalf("second delivery metadata %+v; want delivered twice", md)
			}
			w.handle(queue, second)

			msgs := streamMsgs(t, nc, c.names.EventsStream(), c.names.EventsFilter(id))
			if len(msgs) != 1 || msgs[0].Subject != c.names.EventSubject(id, EventDead) {
				var subjects []string
				for _, m := range msgs {
					subjects = append(subjects, m.Subject)
				}
				t.Fatalf("events of the job %q; want one dead event", subjects)
			}
			var ev Event
			if err := json.Unmarshal(msgs[0].Data, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Attempt != 1 || msgs[0].Header.Get("Nats-Msg-Id") != id+".1.1" {
				t.Errorf("dead event of attempt %d, data %s (msg id %s); want the first attempt's, msg id %s.1.1",
					ev.Attempt, ev.Data, msgs[0].Header.Get("Nats-Msg-Id"), id)
			}
			st, err := c.Status(ctx, id)
			if err != nil || st.Status != StatusDead || st.Attempt != 1 || st.StreamSeq != ack.Sequence || st.Result == nil || st.Result.Attempt != 1 {
				t.Errorf("state %+v, %v; want dead on attempt 1 at stream sequence %d, as its event says", st, err, ack.Sequence)
			}
			if dls := streamMsgs(t, nc, c.names.DLQStream(), ""); len(dls) != 1 {
				t.Errorf("%d dead letters; want 1", len(dls))
			}
			if evs := watchEvents(t, c, id); len(evs) != 1 || evs[0].Type != EventDead {
				t.Errorf("watch saw %+v; want the dead event", evs)
			}
		})
	}
}
