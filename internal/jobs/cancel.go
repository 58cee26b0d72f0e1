package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// cancelQueuedWhy is the error of a job cancelled while nobody ran it.
const cancelQueuedWhy = "cancelled on request before it ran"

// cancelQueueGroup is the queue group of the workers' second subscription
// to cancel requests: one worker of the deployment handles a request for a
// job that nobody runs (onCancelQueued).
const cancelQueueGroup = "jetagent-cancel"

// cancelTransition records a cancel in a job's state, a compare-and-swap:
// a queued job (never claimed, or handed back) becomes cancelled at once,
// with its cancelled event published and, when never claimed, its message
// deleted from the jobs stream; a running one gets cancel_requested (its
// worker, or the next attempt, settles it). was is the status before; a
// job already final is left alone (was says so).
//
// A queued job's cancel used to end it only when submit or jobs.Client
// cancelled it: a cancel request on the wire (`nats req
// agent.cancel.<job_id>`) reached only a running attempt, so a queued
// job's watchers saw no end until the next attempt, forever on a queue no
// worker serves. Workers now answer such requests with this transition
// too (onCancelQueued).
func cancelTransition(ctx context.Context, topo *Topology, states *stateStore, n Names, id string) (st *State, was Status, err error) {
	now := time.Now().UTC()
	var unclaimed bool // queued and never claimed: its message can go
	st, err = states.update(ctx, id, func(cur *State) (*State, error) {
		if cur == nil {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		was, unclaimed = cur.Status, cur.Status == StatusQueued && cur.Attempt == 0
		switch {
		case cur.Status.Terminal():
			return nil, nil
		case cur.Status == StatusQueued:
			why := cancelQueuedWhy
			if cur.Attempt > 0 { // handed back: one ran
				why = fmt.Sprintf("cancelled on request between attempts, after attempt %d", cur.Attempt)
			}
			cur.Status, cur.Error, cur.FinishedAt = StatusCancelled, why, now
			cur.Result = &Result{ID: id, Queue: cur.Queue, Status: StatusCancelled, Error: why}
		case cur.CancelRequested:
			return nil, nil // asked already
		default: // running: the worker settles it
			cur.CancelRequested = true
		}
		return cur, nil
	})
	if err != nil {
		return nil, was, err
	}
	if !was.Terminal() && st.Status == StatusCancelled {
		// No worker can claim the job now: its message goes from the jobs
		// stream at once (a handed-back job's stays: its redelivery also
		// purges the job's journal).
		if unclaimed && st.StreamSeq != 0 {
			dropQueuedMsg(ctx, topo, n, id, st.Queue, st.StreamSeq)
		}
		return st, was, publishCancelled(ctx, topo, n, st)
	}
	return st, was, nil
}

// publishCancelled publishes the cancelled event of a job cancelled while
// nobody ran it. Its message id (<job_id>.0.1) is the same every time, so
// publishing it again within the events' duplicate window stores it once.
func publishCancelled(ctx context.Context, topo *Topology, n Names, st *State) error {
	return publishEvent(ctx, topo.JS, n, Event{JobID: st.ID, Type: EventCancelled, Data: mustJSON(st.Result)})
}

// cancelledUnrun reports whether st is the state of a job cancelled while
// nobody ran it (by cancelTransition), whose event no worker publishes.
func cancelledUnrun(st *State) bool {
	return st != nil && st.Status == StatusCancelled && st.Result != nil && st.Result.Worker == "" &&
		st.Error == cancelQueuedWhy
}

// ensureCancelledEvent publishes the cancelled event of a job cancelled
// unrun when the events stream does not have it: the cancel that ended the
// job may have failed to publish it (NATS restarted between the state's
// write and the event's), and a later cancel found the job final and left
// it so, its watchers waiting for an end they never saw.
func ensureCancelledEvent(ctx context.Context, topo *Topology, n Names, st *State) error {
	if !cancelledUnrun(st) {
		return nil
	}
	return ensureTerminalEvent(ctx, topo, n, st)
}

// ensureTerminalEvent publishes the terminal event of a job whose state is
// final when the events stream has none of that type: the state is
// written before the terminal event, so a worker killed (or a NATS server
// restarted) between the two left a job that ended for its state and
// never for its events' watchers. The event is the one that was lost: the
// state's result, attempt and worker, and the sequence after that
// attempt's last event, so its message id (<job_id>.<attempt>.<seq>) is
// the lost one's, and a publish of it still in flight is stored once.
func ensureTerminalEvent(ctx context.Context, topo *Topology, n Names, st *State) error {
	if st == nil || !st.Status.Terminal() || st.Result == nil {
		return nil
	}
	_, err := topo.Events.GetLastMsgForSubject(ctx, n.EventSubject(st.ID, string(st.Status)))
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, jetstream.ErrMsgNotFound):
		return fmt.Errorf("look up the %s event of %s: %w", st.Status, st.ID, err)
	}
	ev := Event{JobID: st.ID, Type: string(st.Status), Attempt: st.Result.Attempt, Worker: st.Result.Worker, Data: mustJSON(st.Result)}
	last, err := topo.Events.GetLastMsgForSubject(ctx, n.EventsFilter(st.ID))
	switch {
	case err == nil:
		var prev Event
		if json.Unmarshal(last.Data, &prev) == nil && prev.Attempt == ev.Attempt {
			ev.Seq = prev.Seq + 1
		}
	case !errors.Is(err, jetstream.ErrMsgNotFound):
		return fmt.Errorf("look up the last event of %s: %w", st.ID, err)
	}
	return publishEvent(ctx, topo.JS, n, ev)
}

// dropQueuedMsg deletes the message of a job cancelled before any worker
// claimed it from the jobs stream, when the message at seq is that job's.
// A worker that took the message a moment before reads the cancelled state
// when it claims the job and acks it without running it, so deleting it
// under that worker is safe; a worker that claimed the job first made the
// state running, and the cancel then never comes here. Best effort: a
// message left is acked, unrun, by the next worker of its queue.
func dropQueuedMsg(ctx context.Context, topo *Topology, n Names, id, queue string, seq uint64) {
	m, err := topo.Jobs.GetMsg(ctx, seq)
	if err != nil || m.Subject != n.JobsSubject(queue) || jobID(m.Data, m.Header, seq) != id {
		return // gone already (taken and acked), or not this job's
	}
	_ = topo.Jobs.DeleteMsg(ctx, seq)
}

// onCancelQueued handles, on one worker of the deployment (a queue
// group), a cancel request for a job that no attempt of this worker runs:
// a queued job ends cancelled (state, event, message), as `submit cancel`
// ends it, and the request is answered {"job_id", "worker", "status":
// "cancelled"}; a running one gets cancel_requested, so that the next
// attempt obeys it when the one running is gone (a live attempt answers
// the request itself, on its worker's other subscription). A fence notice
// (a Jetagent-Fence header) is no cancel.
func (w *Worker) onCancelQueued(m *nats.Msg) {
	if m.Header.Get(fenceHeader) != "" {
		return
	}
	id := lastToken(m.Subject)
	if !ValidID(id) {
		return
	}
	w.mu.Lock()
	_, mine := w.running[id]
	w.mu.Unlock()
	if mine {
		return // onCancel stops it and answers
	}
	// On the subscription's own goroutine (bounded by opContext): it
	// delays only the next such request, never a running job's cancel.
	ctx, cancel := opContext()
	defer cancel()
	st, was, err := cancelTransition(ctx, w.topo, w.states, w.names, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return // no state: hand-published and not taken yet, or unknown
	case err != nil && st == nil:
		w.log.Warn("cancel request for a job not running here failed", "job", id, "err", err)
		return
	case err != nil:
		w.log.Warn("cancelled event publish failed", "job", id, "err", err)
	}
	if was.Terminal() || st.Status != StatusCancelled {
		return
	}
	w.log.Info("queued job cancelled on request", "job", id)
	if m.Reply != "" {
		b, _ := json.Marshal(map[string]string{"job_id": id, "worker": w.cfg.WorkerID, "status": string(StatusCancelled)})
		_ = m.Respond(b)
	}
}
