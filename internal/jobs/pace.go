package jobs

import (
	"context"
	"math"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A queue's consumer is shared by every worker of the queue, and its ack
// wait, backoff and max deliveries are those of the last worker to start
// (ensureConsumer updates them, logging "updated consumer"). A rolling
// restart that shortened JETAGENT_ACK_WAIT left the workers started
// before heartbeating at their old pace: the server redelivered their
// running jobs, each redelivery handed back as held by a live attempt and
// spending one of the job's deliveries. So each worker reads its
// consumers' settings at every asset look (assetLoop) and paces its
// attempts by them: heartbeats and the fence's limit by the shorter of its
// own ack wait and the consumer's, the last delivery by the consumer's max
// deliveries.

// pace is how an attempt of a queue's job heartbeats and ends.
type pace struct {
	heartbeat  time.Duration // how often the delivery is marked in progress
	ackWait    time.Duration // the shortest the server waits for a heartbeat
	maxDeliver int           // the deliveries a job gets (math.MaxInt: unlimited)
}

// ownPace is the pace of the worker's own configuration.
func (w *Worker) ownPace() pace {
	ack, _ := w.cfg.Topology.shortestAckWait()
	return pace{heartbeat: w.cfg.Heartbeat, ackWait: ack, maxDeliver: w.cfg.Topology.MaxDeliver}
}

// paceOf is the pace of queue's attempts: the worker's own until its
// consumer was read with other settings.
func (w *Worker) paceOf(queue string) pace {
	w.paceMu.Lock()
	defer w.paceMu.Unlock()
	if p, ok := w.paces[queue]; ok {
		return p
	}
	return w.ownPace()
}

// paceChanged is closed when the pace of a queue changes.
func (w *Worker) paceChanged() <-chan struct{} {
	w.paceMu.Lock()
	defer w.paceMu.Unlock()
	return w.paceCh
}

// consumerPace is the pace for a consumer whose settings are cc.
func (w *Worker) consumerPace(cc jetstream.ConsumerConfig) pace {
	p := w.ownPace()
	if theirs, _ := (TopologyConfig{AckWait: cc.AckWait, BackOff: cc.BackOff}).shortestAckWait(); theirs > 0 && theirs < p.ackWait {
		// Longer than ours, ours stays: beats more often than needed and a
		// fence that comes early are safe; late ones are not.
		p.ackWait = theirs
		p.heartbeat = max(min(p.heartbeat, theirs/3), time.Millisecond)
	}
	switch {
	case cc.MaxDeliver > 0:
		p.maxDeliver = cc.MaxDeliver
	case cc.MaxDeliver < 0:
		p.maxDeliver = math.MaxInt
	}
	return p
}

// followConsumers reads the settings of the worker's queue consumers and
// paces their attempts by them, logging a change. A consumer that cannot
// be read keeps its last pace.
func (w *Worker) followConsumers(ctx context.Context) {
	for q, c := range w.topo.Consumers {
		ictx, cancel := context.WithTimeout(ctx, askTimeout)
		info, err := c.Info(ictx)
		cancel()
		if err != nil {
			continue
		}
		w.restoreFilter(ctx, q, info)
		p := w.consumerPace(info.Config)
		w.paceMu.Lock()
		before, known := w.paces[q]
		if !known {
			before = w.ownPace()
		}
		w.paces[q] = p
		if p != before {
			close(w.paceCh) // the running attempts' heartbeats read it
			w.paceCh = make(chan struct{})
		}
		w.paceMu.Unlock()
		switch {
		case p == before:
		case p == w.ownPace():
			w.log.Info("the consumer of the queue has this worker's settings again", "queue", q, "consumer", info.Name,
				"ack_wait", p.ackWait, "max_deliver", info.Config.MaxDeliver, "heartbeat", p.heartbeat)
		default:
			w.log.Warn("the consumer of the queue has other settings than this worker's (a worker of the queue started with "+
				"another JETAGENT_ACK_WAIT, JETAGENT_BACKOFF or JETAGENT_MAX_DELIVER: the last to start sets them); "+
				"this worker's attempts follow the consumer's",
				"queue", q, "consumer", info.Name, "consumer_ack_wait", info.Config.AckWait, "consumer_backoff", info.Config.BackOff,
				"consumer_max_deliver", info.Config.MaxDeliver, "own_ack_wait", w.cfg.Topology.AckWait,
				"own_max_deliver", w.cfg.Topology.MaxDeliver, "heartbeat", p.heartbeat)
		}
	}
}

// restoreFilter puts back the filter of queue's consumer when it was
// changed under the running workers (nats consumer edit --filter): the
// queue's jobs then reached no worker, and nothing said so, until a worker
// started again (ensureConsumer restores it). A filter of another
// deployment's prefix is left alone, as ensureConsumer leaves it.
func (w *Worker) restoreFilter(ctx context.Context, queue string, info *jetstream.ConsumerInfo) {
	want := w.names.JobsSubject(queue)
	have := info.Config
	if have.FilterSubject == want && len(have.FilterSubjects) == 0 {
		return
	}
	filters := append([]string{have.FilterSubject}, have.FilterSubjects...)
	if _, ok := otherPrefix(w.names, filters, []string{want}); ok {
		return
	}
	cfg := have
	cfg.FilterSubject, cfg.FilterSubjects = want, nil
	uctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	if _, err := w.topo.Jobs.UpdateConsumer(uctx, cfg); err != nil {
		w.log.Error("the consumer of the queue has another filter, so its jobs reach no worker; putting it back failed",
			"queue", queue, "consumer", info.Name, "filter", have.FilterSubject, "filters", have.FilterSubjects, "want", want, "err", err)
		return
	}
	w.log.Warn("the consumer of the queue had another filter (changed by hand?), so its jobs reached no worker; put back",
		"queue", queue, "consumer", info.Name, "filter", have.FilterSubject, "filters", have.FilterSubjects, "want", want)
}
