package jobs

import (
	"cmp"
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
		w.log.Debug("could not look for jobs on unserved queues", "err", err)
		return
	}
	waiting, more := boundUnserved(waiting)
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
		if q == otherQueues {
			w.log.Warn("jobs wait on more queues no worker serves (the queues with the most jobs are logged by name)",
				"queues", more, "jobs", n, "subjects", w.names.JobsSubject("*"), "this_worker_serves", served)
			continue
		}
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

// maxUnservedQueues bounds the unserved queues named one by one, in the
// gauge's labels and the log: anyone who may publish on the jobs subjects
// can invent queue names, and each was a series and a warning a minute.
const maxUnservedQueues = 20

// otherQueues stands for the unserved queues beyond maxUnservedQueues and
// for subject tokens that are not queue names (which the gauge and the
// log would quote whole); no queue is named so (ValidQueue).
const otherQueues = "(others)"

// boundUnserved keeps the maxUnservedQueues valid queues with the most
// waiting jobs (by name on ties) and counts the jobs of the rest under
// otherQueues; more is how many queues that is.
func boundUnserved(waiting map[string]uint64) (bounded map[string]uint64, more int) {
	var names []string
	bounded = map[string]uint64{}
	for q, n := range waiting {
		if ValidQueue(q) {
			names = append(names, q)
			continue
		}
		bounded[otherQueues] += n
		more++
	}
	slices.SortFunc(names, func(a, b string) int {
		if waiting[a] != waiting[b] {
			return cmp.Compare(waiting[b], waiting[a])
		}
		return strings.Compare(a, b)
	})
	for i, q := range names {
		if i < maxUnservedQueues {
			bounded[q] = waiting[q]
			continue
		}
		bounded[otherQueues] += waiting[q]
		more++
	}
	return bounded, more
}
