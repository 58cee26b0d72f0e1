package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/natstest"
)

// signalHandler closes ch the first time a log record's message is one of
// msgs.
type signalHandler struct {
	slog.Handler
	msgs []string
	once sync.Once
	ch   chan struct{}
}

func (h *signalHandler) Handle(ctx context.Context, r slog.Record) error {
	for _, m := range h.msgs {
		if r.Message == m {
			h.once.Do(func() { close(h.ch) })
		}
	}
	return nil
}

// Enabled is true for every record: the embedded handler discards them.
func (h *signalHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *signalHandler) WithGroup(string) slog.Handler      { return h }

func logSignal(msgs ...string) (*slog.Logger, <-chan struct{}) {
	h := &signalHandler{Handler: slog.DiscardHandler, msgs: msgs, ch: make(chan struct{})}
	return slog.New(h), h.ch
}

// jobEvents returns the stored events of job id, in order.
func jobEvents(t *testing.T, c *Client, id string) []Event {
	t.Helper()
	ctx := natstest.Context(t)
	cons, err := c.topo.JS.OrderedConsumer(ctx, c.names.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{c.names.EventsFilter(id)},
	})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.FetchNoWait(1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []Event
	for m := range batch.Messages() {
		var ev Event
		if err := json.Unmarshal(m.Data(), &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// eventAttempts returns the attempt of each event of job id, in order.
func eventAttempts(t *testing.T, c *Client, id string) []int {
	t.Helper()
	var out []int
	for _, ev := range jobEvents(t, c, id) {
		out = append(out, ev.Attempt)
	}
	return out
}

// A worker whose heartbeats cannot reach the server stops its attempt
// before the ack wait runs out (its runner sees the job cancelled, its
// events and checkpoints are refused from then on); the redelivered
// attempt on another worker finishes the job, and no event of the first
// attempt comes after the second began.
func TestAttemptFencesItselfWhenHeartbeatsAreLost(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, startServer(t))
	fenced := make(chan error, 1)
	refused := make(chan error, 1)
	var mu sync.Mutex
	runs := map[int]string{}
	runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
		mu.Lock()
		runs[env.Attempt()] = env.WorkerID()
		mu.Unlock()
		if env.WorkerID() == "cut-off" {
			_ = env.Emit(ctx, "note", 1, map[string]string{"text": "working"})
			<-ctx.Done()
			fenced <- context.Cause(ctx)
			refused <- env.Emit(context.Background(), "note", 1, map[string]string{"text": "too late"})
			return nil, ctx.Err()
		}
		_ = env.Emit(ctx, "note", 1, map[string]string{"text": "resumed"})
		return &Outcome{Result: agentloop.Result{Answer: "done by " + env.WorkerID()}}, nil
	})
	_, stopCutOff := startWorkerWith(t, nc, Config{Runner: runner, WorkerID: "cut-off"}, func(w *Worker) {
		w.hbFault = func() (bool, bool) { return false, false } // no heartbeat gets through
	})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	if _, err := c.Submit(ctx, &Job{ID: "cut", Task: "x"}); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-fenced:
		if !errors.Is(cause, errFenced) {
			t.Fatalf("first attempt ended by %v, want errFenced", cause)
		}
	case <-ctx.Done():
		t.Fatal("the attempt never fenced itself")
	}
	if err := <-refused; !errors.Is(err, errFenced) {
		t.Errorf("an event after the fence: %v, want refused", err)
	}
	stopCutOff() // it would fence every attempt it takes
	startWorker(t, nc, Config{Runner: runner, WorkerID: "healthy"})
	st := waitStatus(t, c, "cut")
	if st.Status != StatusSucceeded || st.Result.Answer != "done by healthy" || st.Attempt < 2 {
		t.Fatalf("state %+v %+v", st, st.Result)
	}
	attempts := eventAttempts(t, c, "cut")
	for i := 1; i < len(attempts); i++ {
		if attempts[i] < attempts[i-1] {
			t.Errorf("event attempts %v: an event of an earlier attempt after a later one", attempts)
		}
	}
}

// A job redelivered while its attempt is alive (here its heartbeats are
// not sent, as when a NATS restart or a starved CPU loses them, but the
// attempt goes on) is handed back by the worker that got it: the live
// attempt finishes the job and the job runs once.
func TestRedeliveryWhileTheAttemptIsAliveIsHandedBack(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, startServer(t))
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	var mu sync.Mutex
	var runs []string
	runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
		mu.Lock()
		runs = append(runs, env.WorkerID())
		mu.Unlock()
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &Outcome{Result: agentloop.Result{Answer: "done by " + env.WorkerID()}}, nil
	})
	// Whichever worker the redelivery reaches hands it back.
	log, handedBack := logSignal("job held by a live attempt; handing the delivery back",
		"job already running here; handing the delivery back")
	startWorkerWith(t, nc, Config{Runner: runner, WorkerID: "slow", Logger: log, Concurrency: 1}, func(w *Worker) {
		w.hbFault = func() (bool, bool) { return false, true } // lost, but the attempt does not know
	})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	if _, err := c.Submit(ctx, &Job{ID: "alive", Task: "x"}); err != nil {
		t.Fatal(err)
	}
	<-started
	startWorker(t, nc, Config{Runner: runner, WorkerID: "other", Logger: log})
	select {
	case <-handedBack:
	case <-ctx.Done():
		t.Fatal("the redelivery was not handed back")
	}
	close(release)
	st := waitStatus(t, c, "alive")
	if st.Status != StatusSucceeded || st.Result.Answer != "done by slow" || st.Attempt != 1 {
		t.Fatalf("state %+v %+v", st, st.Result)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(runs, ",") != "slow" {
		t.Errorf("the job ran on %v, want once on slow", runs)
	}
}
