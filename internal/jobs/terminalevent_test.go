package jobs

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestRedeliveryOfAFinishedJobPublishesItsLostTerminalEvent: a worker
// killed between a job's final state and its terminal event (found by the
// soak: SIGKILL right after "job finished" was logged) left the job ended
// for its state and never for its events: the redelivery found the state
// final and acked the message without a word, so a watcher of the job's
// events (nats sub 'agent.events.<id>.>', which stops at the terminal one)
// waited forever. The redelivery now publishes the missing event: the
// state's result, under the message id the lost one had, so that a
// publish of it still in flight is stored once.
func TestRedeliveryOfAFinishedJobPublishesItsLostTerminalEvent(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	w, _ := startWorker(t, nc, Config{Runner: newTestRunner(), UnservedCheck: -1})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	const queue, id = "gone", "lost-terminal"
	rc, err := c.Submit(ctx, &Job{ID: id, Task: "echo:hi", Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	topo, err := EnsureTopology(ctx, c.topo.JS, TopologyConfig{AckWait: 2 * time.Second, MaxDeliver: 3, Queues: []string{queue}}, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	deliver := func() jetstream.Msg { return fetchOne(t, topo.Consumers[queue]) }
	held := deliver()
	// What the killed worker did: its attempt's events, then the final
	// state; not the terminal event, not the ack.
	for seq, typ := range []string{"started", "llm.request"} {
		if err := publishEvent(ctx, c.topo.JS, c.names, Event{JobID: id, Type: typ, Attempt: 1, Seq: seq + 1, Worker: "killed"}); err != nil {
			t.Fatal(err)
		}
	}
	res := &Result{ID: id, Queue: queue, Status: StatusSucceeded, Answer: "hi", Attempt: 1, Worker: "killed"}
	if _, err := c.states.update(ctx, id, func(cur *State) (*State, error) {
		cur.Status, cur.Attempt, cur.Worker, cur.StreamSeq, cur.Result = StatusSucceeded, 1, "killed", rc.Seq, res
		cur.FinishedAt = time.Now().UTC()
		return cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	_ = held.Nak() // the worker is gone: the server hands the message out again
	w.handle(queue, deliver())

	msgs := streamMsgs(t, nc, c.names.EventsStream(), c.names.EventSubject(id, EventSucceeded))
	if len(msgs) != 1 {
		t.Fatalf("%d succeeded events after the redelivery; want 1", len(msgs))
	}
	var ev Event
	if err := json.Unmarshal(msgs[0].Data, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Attempt != 1 || ev.Seq != 3 || ev.Worker != "killed" || msgs[0].Header.Get("Nats-Msg-Id") != id+".1.3" {
		t.Errorf("event %+v (msg id %s); want attempt 1, seq 3, worker killed, msg id %s.1.3", ev, msgs[0].Header.Get("Nats-Msg-Id"), id)
	}
	var got Result
	if err := json.Unmarshal(ev.Data, &got); err != nil || got.Answer != "hi" || got.Status != StatusSucceeded {
		t.Errorf("event data %s (%v); want the state's result", ev.Data, err)
	}
	if evs := watchEvents(t, c, id); len(evs) != 3 || evs[2].Type != EventSucceeded {
		t.Errorf("watch saw %d events; want started, llm.request, succeeded", len(evs))
	}
	if st, err := c.Status(ctx, id); err != nil || st.Status != StatusSucceeded || st.Attempt != 1 {
		t.Errorf("state %+v, %v; want the first attempt's, untouched", st, err)
	}
}
