package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// restoreTopology creates the worker's JetStream assets again when the
// consumer c (a queue's, or the dead-letterer's) is gone: an operator
// removed the jobs stream (ensureStream's own advice for a setting that
// cannot change in place is nats stream rm) or the consumer, or a
// nats-server came back without its store. Before, the worker asked the
// missing consumer for jobs every FetchWait for ever, logging "fetch
// failed", while submitters were told the stream did not exist ("is a
// worker running?"). It is called after a fetch failed; a consumer that
// is there, or a JetStream that does not answer (a restart, a cluster
// electing a leader), leaves everything as it is: the fetch is tried
// again. The handles in w.topo stay valid: they name their assets.
func (w *Worker) restoreTopology(ctx context.Context, c jetstream.Consumer) {
	w.restoreMu.Lock() // the queues' loops and the dead-letterer may all see it
	defer w.restoreMu.Unlock()
	if !consumerGone(ctx, c) {
		return
	}
	name := c.CachedInfo().Name
	w.log.Warn("a JetStream asset of the worker is gone (removed, or the NATS server lost its store): creating the streams, buckets and consumers again",
		"consumer", name)
	logf := func(f string, a ...any) { w.log.Warn(fmt.Sprintf(f, a...)) }
	if _, err := EnsureTopology(ctx, w.topo.JS, w.cfg.Topology, logf); err != nil {
		if ctx.Err() == nil {
			w.log.Error("could not create the JetStream assets again; trying again after the next failed fetch", "err", err)
		}
		return
	}
	w.log.Info("JetStream assets created again", "consumer", name)
}

// consumerGone reports whether the server says c or its stream does not
// exist; any other answer (c's info, a timeout, no responders) is not
// "gone".
func consumerGone(ctx context.Context, c jetstream.Consumer) bool {
	ictx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	_, err := c.Info(ictx)
	return errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound)
}

// jobsFirstSeq is the first sequence of a jobs stream about to be
// created: 1 on a new deployment, but the current time in microseconds
// when the state bucket has had states written. Those states name the
// stream sequences of their jobs' messages (State.StreamSeq), which is how
// a worker tells a redelivery of a message from another message with the
// same id, and a job published without an id is named by its sequence
// (GeneratedID). A recreated stream counting from 1 again gave its
// messages the sequences, and so the generated ids, of jobs that had
// ended: each was taken for a redelivery of that job and acknowledged
// unrun, lost without a word. Counting from the time keeps the new
// sequences above every earlier incarnation's, as long as those did not
// average a message per microsecond.
func jobsFirstSeq(ctx context.Context, js jetstream.JetStream, n Names) (uint64, error) {
	s, err := ask(ctx, func(ctx context.Context) (jetstream.Stream, error) { return js.Stream(ctx, "KV_"+n.StateBucket()) })
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("stream of key-value bucket %s: %w", n.StateBucket(), err)
	}
	if s.CachedInfo().State.LastSeq == 0 {
		return 0, nil
	}
	return uint64(time.Now().UnixMicro()), nil
}
