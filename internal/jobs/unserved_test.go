package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// warnRecorder sends the worker's warnings, as "message k=v ...", to ch.
type warnRecorder struct {
	mu sync.Mutex
	ch chan string
}

func (h *warnRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *warnRecorder) Handle(_ context.Context, r slog.Record) error {
	s := r.Message
	r.Attrs(func(a slog.Attr) bool { s += fmt.Sprintf(" %s=%v", a.Key, a.Value); return true })
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case h.ch <- s:
	default: // the test reads what it waits for; more is not kept
	}
	return nil
}
func (h *warnRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *warnRecorder) WithGroup(string) slog.Handler      { return h }

// TestUnservedQueueLogged: jobs published on a queue no worker serves (here
// a typo of the served one, by a plain NATS client) are logged with their
// count and the served queue they probably meant, once per count, and
// counted in jetagent_jobs_unserved; once a worker serves that queue, they
// run and the gauge forgets it.
func TestUnservedQueueLogged(t *testing.T) {
	t.Parallel()
	nc, err := nats.Connect(startServer(t).ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	rec := &warnRecorder{ch: make(chan string, 16)}
	runner := RunnerFunc(func(context.Context, *Job, RunEnv) (*Outcome, error) { return &Outcome{}, nil })
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	// unserved is the gauge's value by queue.
	unserved := func() map[string]float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if mf.GetName() == "jetagent_jobs_unserved" {
					out[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
		return out
	}
	startWorker(t, nc, Config{Runner: runner, WorkerID: "default-only", Logger: slog.New(rec), Metrics: metrics,
		UnservedCheck: 20 * time.Millisecond})
	c := newClient(t, nc)
	for _, id := range []string{"typo-1", "typo-2"} {
		if err := nc.Publish(c.names.JobsSubject("defualt"), []byte(`{"id":"`+id+`","task":"t"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	want := "jobs wait on a queue no worker serves: start a worker with it in its queues, or republish them " +
		"queue=defualt jobs=2 subject=agent.jobs.defualt this_worker_serves=[default] did_you_mean=default"
	timeout := time.After(waitTimeout)
	var got []string
	for !slices.Contains(got, want) {
		select {
		case s := <-rec.ch:
			got = append(got, s)
		case <-timeout:
			t.Fatalf("no warning %q; got %q", want, got)
		}
	}
	if got := unserved(); len(got) != 1 || got["defualt"] != 2 {
		t.Errorf("jetagent_jobs_unserved = %v, want defualt: 2", got)
	}
	// A worker for the queue takes them.
	startWorker(t, nc, Config{Runner: runner, WorkerID: "typo-queue", Topology: TopologyConfig{
		AckWait: testTopology().AckWait, MaxDeliver: 3, Queues: []string{"defualt"}}})
	for _, id := range []string{"typo-1", "typo-2"} {
		if st := waitStatus(t, c, id); st.Status != StatusSucceeded {
			t.Errorf("%s: %s", id, st.Status)
		}
	}
	// The gauge forgets a queue that is served.
	pollUntil(t, "the unserved gauge to be empty", func() bool { return len(unserved()) == 0 })
	// Nothing was logged twice for the same count.
	for {
		select {
		case s := <-rec.ch:
			got = append(got, s)
			continue
		default:
		}
		break
	}
	if n := countOf(got, want); n != 1 {
		t.Errorf("the warning was logged %d times: %q", n, got)
	}
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}
