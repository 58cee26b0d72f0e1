package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// Fencing: one attempt of a job at a time.
//
// JetStream redelivers a job whose heartbeats stopped reaching the server
// (a crashed worker, but also a NATS restart, a lost connection or a worker
// starved of CPU). The new attempt must not run while the old one still
// does, and an old attempt that may have been replaced must stop before
// its next side effect. Three rules make that so:
//
//   - A delivery of a job whose state says another attempt runs it asks
//     that attempt whether it is alive (a core request on
//     <prefix>.alive.<job_id>, answered by the worker running it). If it
//     answers, the delivery is handed back and the live attempt goes on.
//   - An attempt whose heartbeats could not be delivered for nearly the
//     ack wait (the shortest redelivery delay, less half a heartbeat) fences
//     itself: the server may redeliver the job at any moment now.
//   - An attempt that takes a job over from one that did not answer tells it
//     (a message on the job's cancel subject with a Jetagent-Fence header);
//     and an attempt that was disconnected checks, once connected again,
//     that its state still names it before it goes on.
//
// A fenced attempt's context is cancelled with errFenced: the runner stops
// (an MCP call in flight is cancelled), its events and checkpoints are
// refused, and it ends without touching the job's state or its delivery.

// errFenced is the cancellation cause of an attempt that lost its job.
var errFenced = errors.New("attempt fenced: another attempt may own the job")

// fenceHeader carries the attempt that took a job over.
const fenceHeader = "Jetagent-Fence"

// aliveTimeout bounds the wait for a running attempt's answer.
const aliveTimeout = 2 * time.Second

// runningAttempt is a job running on this worker.
type runningAttempt struct {
	// attempt is the attempt's number: the delivery count, or one more
	// than an earlier attempt of the message already used (see
	// Worker.run); set before claimed.
	attempt atomic.Int64
	cancel  context.CancelCauseFunc
	fenced  *atomic.Bool
	claimed atomic.Bool // the job's state names this attempt
	// claimRev is the state's revision the claim wrote.
	claimRev atomic.Uint64
	seq      uint64 // the stream sequence of the attempt's message
}

// fence cancels the attempt for good.
func (r *runningAttempt) fence(why error) {
	if r.fenced.CompareAndSwap(false, true) {
		r.cancel(fmt.Errorf("%w: %w", errFenced, why))
	}
}

// aliveAnswer is the reply of the worker running a job.
type aliveAnswer struct {
	JobID   string `json:"job_id"`
	Worker  string `json:"worker"`
	Attempt int    `json:"attempt"`
}

// onAlive answers for a job running here.
func (w *Worker) onAlive(m *nats.Msg) {
	id := lastToken(m.Subject)
	w.mu.Lock()
	r, ok := w.running[id]
	w.mu.Unlock()
	if !ok || !r.claimed.Load() || r.fenced.Load() || m.Reply == "" {
		return
	}
	b, _ := json.Marshal(aliveAnswer{JobID: id, Worker: w.cfg.WorkerID, Attempt: int(r.attempt.Load())})
	_ = m.Respond(b)
}

// liveOwner reports the attempt that holds the job and answers, when the
// job's state says another attempt of this very message runs it.
func (w *Worker) liveOwner(ctx context.Context, d delivery) (*aliveAnswer, error) {
	cur, _, err := w.states.get(ctx, d.id)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// Asked also when the state names this very attempt number: after a
	// NATS server lost its record of a delivery (killed before its
	// consumer state was saved, or the consumer recreated) the server
	// hands out a count an attempt that may still run already has.
	if cur.Status != StatusRunning || cur.StreamSeq != d.seq {
		return nil, nil
	}
	return w.askAlive(ctx, d.id), nil
}

// askAlive asks the worker running job id; nil when none answers (the
// attempt is gone, or cut off and fencing itself).
func (w *Worker) askAlive(ctx context.Context, id string) *aliveAnswer {
	actx, cancel := context.WithTimeout(ctx, aliveTimeout)
	defer cancel()
	reply, err := w.cfg.Conn.RequestWithContext(actx, w.names.AliveSubject(id), nil)
	if err != nil {
		return nil
	}
	var a aliveAnswer
	if json.Unmarshal(reply.Data, &a) != nil {
		return nil
	}
	return &a
}

// fenceOthers tells an attempt this one took the job over from to stop.
func (w *Worker) fenceOthers(d delivery) {
	m := nats.NewMsg(w.names.CancelSubject(d.id))
	m.Header.Set(fenceHeader, strconv.Itoa(d.attempt))
	if err := w.cfg.Conn.PublishMsg(m); err != nil {
		w.log.Warn("fence notice failed", "job", d.id, "attempt", d.attempt, "err", err)
	}
}

// stillOwned re-reads the job's state: false when another attempt or
// worker took it, or it ended. A state older than the attempt's claim
// (revision claimRev) says nothing: in a cluster any replica answers the
// read, and one that lags (a node that just came back) may not have the
// claim yet.
func (w *Worker) stillOwned(d delivery, claimRev uint64) (bool, error) {
	ctx, cancel := opContext()
	defer cancel()
	cur, rev, err := w.states.get(ctx, d.id)
	if err != nil {
		return false, err
	}
	if rev < claimRev {
		return true, nil
	}
	return w.owned(d, cur) == nil, nil
}

// heartbeatFault, when set (tests), decides for each heartbeat whether it
// is sent and whether it counts as delivered.
type heartbeatFault func() (send, delivered bool)

func lastToken(subject string) string {
	for i := len(subject) - 1; i >= 0; i-- {
		if subject[i] == '.' {
			return subject[i+1:]
		}
	}
	return subject
}
