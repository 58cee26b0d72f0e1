package jobs

import (
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
			Name: "jetagent_jobs_running", Help: "Jobs running on this worker.",
		}),
	}
	for _, c := range []prometheus.Collector{m.started, m.finished, m.retried, m.requeued, m.duration, m.running} {
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
	}
}

// rejected records a job dead-lettered without running.
func (m *Metrics) rejected(queue string) {
	if m == nil {
		return
	}
	m.finished.WithLabelValues(queue, string(StatusDead)).Inc()
}
