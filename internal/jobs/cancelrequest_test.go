package jobs

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestCancelRequestEndsAQueuedJob: a cancel request on the wire (`nats req
// agent.cancel.<job_id> ”`, what a client without jobs.Client sends) for a
// job nobody runs ends it as `submit cancel` does: its state says
// cancelled, its cancelled event is published (a watcher of its events
// sees it end) and its message leaves the jobs stream; the request is
// answered. It used to go unanswered and change nothing: the job stayed
// queued, its watchers waiting, until a worker of its queue took it
// (forever on a queue no worker serves), also when the requester had set
// cancel_requested by hand as the README says.
func TestCancelRequestEndsAQueuedJob(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		// flagged: cancel_requested was set by a compare-and-swap first
		flagged bool
	}{
		{name: "queued"},
		{name: "queued with cancel_requested", flagged: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			nc := natstest.Connect(t, s)
			// Two workers (the request is handled once), serving "default"
			// only; the job goes to "idle", a queue no worker serves.
			startWorker(t, nc, Config{Runner: newTestRunner(), UnservedCheck: -1, WorkerID: "w1"})
			startWorker(t, nc, Config{Runner: newTestRunner(), UnservedCheck: -1, WorkerID: "w2"})
			c := newClient(t, nc)
			ctx := natstest.Context(t)
			const queue, id = "idle", "wire-cancel"
			if _, err := c.Submit(ctx, &Job{ID: id, Task: "echo:no", Queue: queue}); err != nil {
				t.Fatal(err)
			}
			waitStatus(t, c, id, StatusQueued)
			if tt.flagged {
				if _, err := c.states.update(ctx, id, func(cur *State) (*State, error) {
					cur.CancelRequested = true
					return cur, nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			watched := make(chan []Event, 1)
			go func() {
				var evs []Event
				_, _ = c.Watch(ctx, id, func(ev Event) { evs = append(evs, ev) })
				watched <- evs
			}()
			reply, err := nc.Request(c.names.CancelSubject(id), nil, waitTimeout)
			if err != nil {
				t.Fatalf("cancel request of a queued job: %v; want an answer", err)
			}
			var ans map[string]string
			if err := json.Unmarshal(reply.Data, &ans); err != nil || ans["job_id"] != id || ans["status"] != "cancelled" {
				t.Errorf("answer %s (%v); want job_id %s, status cancelled", reply.Data, err, id)
			}
			st, err := c.Status(ctx, id)
			if err != nil || st.Status != StatusCancelled || st.Error != "cancelled on request before it ran" {
				t.Fatalf("state %+v, %v; want cancelled before it ran", st, err)
			}
			var evs []Event
			select {
			case evs = <-watched:
			case <-time.After(waitTimeout):
				t.Fatal("the watch of the cancelled job did not end")
			}
			if len(evs) != 1 || evs[0].Type != EventCancelled {
				t.Errorf("events %+v; want one cancelled event", evs)
			}
			if msgs := streamMsgs(t, nc, c.names.JobsStream(), ""); len(msgs) != 0 {
				t.Errorf("the cancelled job's message is still in %s", c.names.JobsStream())
			}
			// A second request finds it ended: nobody answers, nothing more
			// is published.
			if _, err := nc.Request(c.names.CancelSubject(id), nil, 300*time.Millisecond); err == nil {
				t.Error("a cancel request of an ended job was answered")
			}
			if msgs := streamMsgs(t, nc, c.names.EventsStream(), c.names.EventsFilter(id)); len(msgs) != 1 {
				t.Errorf("%d events; want the one cancelled event", len(msgs))
			}
		})
	}
}

// TestCancelRequestOfARunningJob: a cancel request for a running job is
// still answered by its worker alone, and ends it cancelled on request.
func TestCancelRequestOfARunningJob(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	r := newTestRunner()
	startWorker(t, nc, Config{Runner: r, WorkerID: "runs"})
	startWorker(t, nc, Config{Runner: newTestRunner(), WorkerID: "idle", Topology: TopologyConfig{
		AckWait: testTopology().AckWait, MaxDeliver: testTopology().MaxDeliver, Queues: []string{"other"}}})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	if _, err := c.Submit(ctx, &Job{ID: "busy", Task: "block"}); err != nil {
		t.Fatal(err)
	}
	r.waitStarted(t, 1)
	reply, err := nc.Request(c.names.CancelSubject("busy"), nil, waitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var ans map[string]string
	if err := json.Unmarshal(reply.Data, &ans); err != nil || ans["worker"] != "runs" {
		t.Errorf("answer %s (%v); want the running worker's", reply.Data, err)
	}
	cctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	st, err := c.Wait(cctx, "busy")
	if err != nil || st.Status != StatusCancelled || st.Error != "cancelled on request" {
		t.Fatalf("state %+v, %v; want cancelled on request", st, err)
	}
}

// TestCancelPublishesALostCancelledEvent: a job cancelled while queued
// whose cancelled event was not published (NATS went away between the
// state's write and the event's: Cancel returned the error) gets it from
// the next Cancel. That Cancel found the job final and returned, so the
// job's watchers never saw it end. Published again it is not stored twice.
func TestCancelPublishesALostCancelledEvent(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	startWorker(t, nc, Config{Runner: newTestRunner(), UnservedCheck: -1})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	const id = "lost-event"
	// What a queued cancel writes, without its event.
	if _, err := c.states.update(ctx, id, func(*State) (*State, error) {
		return &State{ID: id, Queue: "idle", Status: StatusCancelled, Error: "cancelled on request before it ran", Task: "x",
			Result: &Result{ID: id, Queue: "idle", Status: StatusCancelled, Error: "cancelled on request before it ran"}, CreatedAt: time.Now().UTC()}, nil
	}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if st, err := c.Cancel(ctx, id); err != nil || st.Status != StatusCancelled {
			t.Fatalf("cancel: %+v, %v", st, err)
		}
	}
	msgs := streamMsgs(t, nc, c.names.EventsStream(), c.names.EventsFilter(id))
	if len(msgs) != 1 || msgs[0].Subject != c.names.EventSubject(id, EventCancelled) {
		t.Fatalf("%d events; want one cancelled event", len(msgs))
	}
}
