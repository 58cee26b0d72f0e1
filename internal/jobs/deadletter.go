package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// maxDeliveriesAdvisory is the part of the server's
// io.nats.jetstream.advisory.v1.max_deliver advisory the dead-letterer reads.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// deadLetterLoop handles max-deliveries advisories: a job whose deliveries
// all ended without an ack (workers crashed or lost it) stays in the
// WorkQueue stream, invisible to consumers; this copies it to the
// dead-letter stream, marks it dead and deletes it. The advisories are kept
// in a stream with a shared durable consumer, so exactly one worker handles
// each, and none is lost while no worker runs.
func (w *Worker) deadLetterLoop(ctx context.Context) {
	fails := newFailRun(w.log, "advisory fetch") // one line a second, as the job fetches
	for ctx.Err() == nil {
		msg, err := w.topo.AdvisoryConsumer.Next(jetstream.FetchMaxWait(w.cfg.FetchWait))
		if err == nil || errors.Is(err, nats.ErrTimeout) {
			fails.ok()
		}
		if err != nil {
			if !errors.Is(err, nats.ErrTimeout) && ctx.Err() == nil {
				fails.fail(err)
				w.restoreTopology(ctx, w.topo.AdvisoryConsumer)
				select {
				case <-ctx.Done():
				case <-time.After(w.cfg.FetchWait):
				}
			}
			continue
		}
		if err := w.onMaxDeliveries(msg); err != nil {
			if errors.Is(err, errHeldAlive) {
				// Its attempt is alive: the job ends by itself.
				w.log.Info("max deliveries reached while an attempt runs the job; looking again later", "err", err)
				_ = msg.NakWithDelay(w.ackWait())
				continue
			}
			w.log.Error("dead-lettering after max deliveries failed; will retry", "err", err)
			_ = msg.NakWithDelay(w.cfg.RetryDelay)
			continue
		}
		_ = msg.Ack()
	}
}

func (w *Worker) onMaxDeliveries(msg jetstream.Msg) error {
	var adv maxDeliveriesAdvisory
	if err := json.Unmarshal(msg.Data(), &adv); err != nil || adv.StreamSeq == 0 {
		w.log.Warn("ignoring malformed advisory", "data", string(msg.Data()))
		return nil
	}
	ctx, cancel := opContext()
	defer cancel()
	raw, err := w.topo.Jobs.GetMsg(ctx, adv.StreamSeq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil // handled already (or acked after all)
	}
	if err != nil {
		return fmt.Errorf("get job %d: %w", adv.StreamSeq, err)
	}
	queue := raw.Subject[strings.LastIndexByte(raw.Subject, '.')+1:]
	id := jobID(raw.Data, raw.Header, adv.StreamSeq)
	cur, _, err := w.states.get(ctx, id)
	var bad *badStateError
	if errors.As(err, &bad) {
		// Not a job state (put by hand): retried, the advisory was handled
		// again for ever. Replaced by this message's, the job goes dead
		// below with the bad value in its reason.
		st := &State{ID: id, Queue: queue, Status: StatusQueued, StreamSeq: adv.StreamSeq, CreatedAt: time.Now().UTC(),
			Error: bad.Error() + "; so whether the job ran cannot be told"}
		if err := w.states.replaceBad(ctx, bad, st); err != nil {
			return err
		}
		w.log.Error("the job's state is not a job state; dead-lettering the job", "job", id, "state", bad.Error())
		cur, err = st, nil
	}
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	if cur != nil && cur.StreamSeq != 0 && cur.StreamSeq != adv.StreamSeq {
		// The id's state is another message's (a copy published with the
		// id of a job queued, running or ended): this copy is dead-lettered
		// and the other's state left alone. It was deleted without a word
		// when the other had ended, and held for as long as it ran.
		reason := cutReason(oneLine(fmt.Sprintf("max deliveries exhausted: delivered %d times without being "+
			"acknowledged (consumer %s); another message with the same job id (stream sequence %d, %s) holds the id: "+
			"this copy was not run", adv.Deliveries, adv.Consumer, cur.StreamSeq, cur.Status)))
		if err := w.deadLetter(ctx, queue, id, adv.StreamSeq, raw.Data, raw.Header, reason); err != nil {
			return err
		}
		w.log.Warn("job copy dead-lettered", "job", id, "queue", queue, "reason", reason)
		w.cfg.Metrics.rejected(queue, errDuplicate)
	} else if cur != nil && cur.Status == StatusRunning && w.askAlive(ctx, id) != nil {
		return fmt.Errorf("%w: job %s", errHeldAlive, id)
	}
	if cur == nil || (!cur.Status.Terminal() && (cur.StreamSeq == 0 || cur.StreamSeq == adv.StreamSeq)) {
		reason := fmt.Sprintf("max deliveries exhausted: delivered %d times without being acknowledged (consumer %s)",
			adv.Deliveries, adv.Consumer)
		if cur != nil && cur.Error != "" {
			reason += "; last error: " + cur.Error
		}
		reason = cutReason(oneLine(reason))
		if err := w.deadLetter(ctx, queue, id, adv.StreamSeq, raw.Data, raw.Header, reason); err != nil {
			return err
		}
		w.log.Warn("job dead-lettered", "job", id, "queue", queue, "reason", reason)
		res := &Result{ID: id, Queue: queue, Status: StatusDead, Error: reason, Attempt: int(adv.Deliveries), Worker: w.cfg.WorkerID}
		if err := w.markDead(ctx, &runEnv{w: w, jobID: id}, queue, adv.StreamSeq, res); err != nil {
			// The job's message stays, so the advisory, handled again,
			// finds it (its dead letter is not copied twice).
			return err
		}
		w.cfg.Metrics.rejected(queue, nil)
	}
	if err := w.topo.Jobs.DeleteMsg(ctx, adv.StreamSeq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("delete job %d: %w", adv.StreamSeq, err)
	}
	return nil
}

// errHeldAlive: a job's deliveries ran out while an attempt still runs it
// (its heartbeats did not reach the server): not dead yet.
var errHeldAlive = errors.New("held by a live attempt")
