package jobs

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/textdist"
)

// DefaultUnservedCheck is how often a worker looks for jobs waiting on
// queues that no worker serves.
const DefaultUnservedCheck = time.Minute

// unservedTimeout bounds one look (a stream info and a consumer list).
const unservedTimeout = 10 * time.Second

// unservedLoop logs, at start and every UnservedCheck, the jobs that wait
// on queues no worker serves. A job published on a queue's subject is
// stored whether or not a worker serves that queue (the jobs stream takes
// every queue's subject), so one sent by the nats CLI or another service to
// a misspelt or undeployed queue waits there unseen: nobody answers, and
// only an operator can act. Each queue is logged again only when its count
// changes.
func (w *Worker) unservedLoop(ctx context.Context) {
	if w.cfg.UnservedCheck < 0 {
		return
	}
	logged := map[string]uint64{}
	t := time.NewTicker(w.cfg.UnservedCheck)
	defer t.Stop()
	for {
		w.checkUnserved(ctx, logged)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkUnserved is one look; logged holds the counts last logged, by queue.
// It is best effort: a look that fails is tried again at the next tick.
func (w *Worker) checkUnserved(ctx context.Context, logged map[string]uint64) {
	ctx, cancel := context.WithTimeout(ctx, unservedTimeout)
	defer cancel()
	waiting, err := w.unservedQueues(ctx)
	if err != nil {
		w.log.Debug("could not look for jobs on unserved queues", "error", err)
		return
	}
	w.cfg.Metrics.unservedCounted(waiting, logged)
	for q := range logged {
		if _, ok := waiting[q]; !ok {
			delete(logged, q) // served now, or emptied
		}
	}
	served := slices.Sorted(maps.Keys(w.topo.Consumers))
	for _, q := range slices.Sorted(maps.Keys(waiting)) {
		n := waiting[q]
		if logged[q] == n {
			continue
		}
		logged[q] = n
		attrs := []any{"queue", q, "jobs", n, "subject", w.names.JobsSubject(q), "this_worker_serves", served}
		if near := textdist.Closest(q, served); near != "" {
			attrs = append(attrs, "did_you_mean", near)
		}
		w.log.Warn("jobs wait on a queue no worker serves: start a worker with it in its queues, or republish them", attrs...)
	}
}

// unservedQueues counts the stored jobs of each queue that has no shared
// consumer.
func (w *Worker) unservedQueues(ctx context.Context) (map[string]uint64, error) {
	info, err := w.topo.Jobs.Info(ctx, jetstream.WithSubjectFilter(w.names.JobsSubject("*")))
	if err != nil {
		return nil, err
	}
	prefix := w.names.JobsSubject("")
	waiting := map[string]uint64{}
	for subject, n := range info.State.Subjects {
		if q, ok := strings.CutPrefix(subject, prefix); ok && n > 0 {
			waiting[q] = n
		}
	}
	if len(waiting) == 0 {
		return waiting, nil
	}
	names := w.topo.Jobs.ConsumerNames(ctx)
	consumer := w.names.Consumer("")
	for name := range names.Name() {
		if q, ok := strings.CutPrefix(name, consumer); ok {
			delete(waiting, q)
		}
	}
	return waiting, names.Err()
}
