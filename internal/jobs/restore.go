package jobs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultAssetCheck is how often a worker looks for its streams and
// buckets (one request listing the account's stream names).
const DefaultAssetCheck = 10 * time.Second

// restoreTopology creates the worker's JetStream assets again when one is
// gone: the consumer c (a queue's, or the dead-letterer's; nil: none to
// ask about) or any stream or bucket. An operator removed it (ensureStream's
// own advice for a setting that cannot change in place is nats stream rm;
// nats kv del, nats consumer rm), or a nats-server came back without its
// store. Before, a worker whose jobs stream or consumer was gone asked
// for jobs every FetchWait for ever, logging "fetch failed", one whose
// state bucket was gone handed every job back until its deliveries ran
// out, and submitters were told a stream did not exist ("is a worker
// running?"). A JetStream that does not answer (a restart, a cluster
// electing a leader) leaves everything as it is. The handles in w.topo
// stay valid: they name their assets.
func (w *Worker) restoreTopology(ctx context.Context, c jetstream.Consumer) {
	w.restoreMu.Lock() // the queues' loops, the dead-letterer and assetLoop may all see it
	defer w.restoreMu.Unlock()
	gone := w.missingStreams(ctx)
	if c != nil && consumerGone(ctx, c) {
		gone = append(gone, "consumer "+c.CachedInfo().Name)
	}
	if len(gone) == 0 {
		return
	}
	w.log.Warn("a JetStream asset of the worker is gone (removed, or the NATS server lost its store): creating the streams, buckets and consumers again",
		"gone", gone)
	logf := func(f string, a ...any) { w.log.Warn(fmt.Sprintf(f, a...)) }
	if _, err := EnsureTopology(ctx, w.topo.JS, w.cfg.Topology, logf); err != nil {
		if ctx.Err() == nil {
			w.log.Error("could not create the JetStream assets again; trying again at the next check", "err", err)
		}
		return
	}
	w.log.Info("JetStream assets created again", "gone", gone)
}

// missingStreams names the streams of the worker's assets that the server
// does not list (nil when it cannot be asked: nothing is known missing).
func (w *Worker) missingStreams(ctx context.Context) []string {
	n := w.names
	want := map[string]bool{
		n.JobsStream(): true, n.EventsStream(): true, n.DLQStream(): true, n.AdvisoryStream(): true,
		"KV_" + n.StateBucket(): true, "KV_" + n.JournalBucket(): true, "OBJ_" + n.TranscriptBucket(): true,
	}
	lctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	l := w.topo.JS.StreamNames(lctx)
	for name := range l.Name() {
		delete(want, name)
	}
	if l.Err() != nil {
		return nil
	}
	return slices.Sorted(maps.Keys(want))
}

// assetLoop looks for the worker's assets every AssetCheck, and when an
// operation of the worker failed in a way a missing asset explains
// (checkAssets): a stream removed while no job ran is back before a
// submitter needs it.
//
// At each tick it also reads the settings of the queues' consumers
// (followConsumers) and the events stream's max_msg_size
// (followEventsLimit), every DefaultAssetCheck when AssetCheck is
// negative.
func (w *Worker) assetLoop(ctx context.Context) {
	every := w.cfg.AssetCheck
	if every <= 0 {
		every = DefaultAssetCheck
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if w.cfg.AssetCheck > 0 {
				w.restoreTopology(ctx, nil)
			}
			w.followConsumers(ctx)
			w.followEventsLimit(ctx)
		case <-w.checkNow:
			w.restoreTopology(ctx, nil)
		}
	}
}

// checkAssets has assetLoop look for the worker's assets now (without
// waiting: a check already asked for will do).
func (w *Worker) checkAssets() {
	select {
	case w.checkNow <- struct{}{}:
	default:
	}
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
