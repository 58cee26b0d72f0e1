package jobs

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the worker's Prometheus collectors. A nil *Metrics records
// nothing, so the worker needs no registry in tests.
type Metrics struct {
	started  *prometheus.CounterVec
	finished *prometheus.CounterVec
	retried  *prometheus.CounterVec
	requeued *prometheus.CounterVec
	duration *prometheus.HistogramVec
	running  prometheus.Gauge
	wait     *prometheus.HistogramVec
	dead     *prometheus.CounterVec
	unserved *prometheus.GaugeVec
}

// NewMetrics registers the collectors with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		started: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jetagent_jobs_started_total", Help: "Job attempts started, by queue.",
		}, []string{"queue"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jetagent_jobs_finished_total",
			Help: "Jobs that reached a final status (succeeded, failed, cancelled, dead), by queue.",
		}, []string{"queue", "status"}),
		retried: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jetagent_jobs_retried_total", Help: "Attempts handed back for a retry after a transient error.",
		}, []string{"queue"}),
		requeued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jetagent_jobs_requeued_total", Help: "Running jobs handed back at shutdown.",
		}, []string{"queue"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "jetagent_job_duration_seconds", Help: "Duration of job attempts, by final status of the attempt.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 16), // 50ms .. ~27min
		}, []string{"queue", "status"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jetagent_jobs_running", Help: "Jobs running on this worker (in flight).",
		}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "jetagent_job_queue_wait_seconds",
			Help:    "Time from a job's publication to the start of its first attempt, by queue.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 22), // 1ms .. ~35min
		}, []string{"queue"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "jetagent_dead_letters_total",
			Help: "Jobs dead-lettered, by queue and reason class: not_json, schema, too_large, unknown_server, " +
				"wrong_queue, refused (the worker's admission check), duplicate (a copy of a running or finished " +
				"job), retries_exhausted (its last attempt failed transiently), max_deliveries (deliveries ran out unacknowledged).",
		}, []string{"queue", "reason"}),
		unserved: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "jetagent_jobs_unserved",
			Help: "Jobs stored on a queue that no worker serves, by queue, as this worker last counted them (each minute): they wait until a worker serves the queue.",
		}, []string{"queue"}),
	}
	for _, c := range []prometheus.Collector{m.started, m.finished, m.retried, m.requeued, m.duration, m.running, m.wait, m.dead, m.unserved} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) jobStarted(queue string) {
	if m == nil {
		return
	}
	m.started.WithLabelValues(queue).Inc()
	m.running.Inc()
}

// attemptEnded records the end of an attempt; status is a final status,
// "retry"/"requeued" for hand-backs, or "lost" when another worker had
// taken the job over.
func (m *Metrics) attemptEnded(queue, status string, d time.Duration) {
	if m == nil {
		return
	}
	m.running.Dec()
	m.duration.WithLabelValues(queue, status).Observe(d.Seconds())
	switch status {
	case "retry":
		m.retried.WithLabelValues(queue).Inc()
	case "requeued":
		m.requeued.WithLabelValues(queue).Inc()
	case "lost":
	default:
		m.finished.WithLabelValues(queue, status).Inc()
		if status == string(StatusDead) { // the only way an attempt ends dead
			m.dead.WithLabelValues(queue, deadRetriesExhausted).Inc()
		}
	}
}

// Dead-letter reason classes of jetagent_dead_letters_total.
const (
	deadRetriesExhausted = "retries_exhausted"
	deadMaxDeliveries    = "max_deliveries"
	deadDuplicate        = "duplicate"
)

// rejected records a job dead-lettered without running: cause is why
// (a door error; a duplicate copy), nil when its deliveries ran out.
func (m *Metrics) rejected(queue string, cause error) {
	if m == nil {
		return
	}
	m.finished.WithLabelValues(queue, string(StatusDead)).Inc()
	m.dead.WithLabelValues(queue, deadClass(cause)).Inc()
}

// deadClass is the reason class of a dead letter's cause.
func deadClass(cause error) string {
	for _, c := range []struct {
		err   error
		class string
	}{
		{ErrNotJSON, "not_json"}, {ErrSchema, "schema"}, {ErrTooLarge, "too_large"},
		{ErrUnknownServer, "unknown_server"}, {ErrWrongQueue, "wrong_queue"},
	} {
		if errors.Is(cause, c.err) {
			return c.class
		}
	}
	switch {
	case cause == nil:
		return deadMaxDeliveries
	case errors.Is(cause, ErrRejected):
		return "refused"
	}
	return deadDuplicate
}

// queueWaited records how long a job waited for its first attempt.
func (m *Metrics) queueWaited(queue string, d time.Duration) {
	if m == nil {
		return
	}
	m.wait.WithLabelValues(queue).Observe(max(d, 0).Seconds())
}

// unservedCounted sets the unserved-jobs gauge to waiting, removing the
// queues that no longer wait.
func (m *Metrics) unservedCounted(waiting map[string]uint64, before map[string]uint64) {
	if m == nil {
		return
	}
	for q := range before {
		if _, ok := waiting[q]; !ok {
			m.unserved.DeleteLabelValues(q)
		}
	}
	for q, n := range waiting {
		m.unserved.WithLabelValues(q).Set(float64(n))
	}
}
