package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/journal"
	"github.com/jetagent/jetagent/internal/natstest"
)

// A NATS server can hand out a delivery count an attempt of the same
// message already had: a server SIGKILLed within its consumer state's
// flush interval (100 ms) after a delivery forgets it and delivers the
// message again, at once, as delivery 1; so does a consumer an operator
// deleted and created again. These tests recreate the consumer, which
// forgets deliveries the same way, deterministically.
//
// Such a delivery used to be taken for the attempt the state already
// named: it was not asked whether that attempt was alive (same number), so
// two attempts ran at once; the earlier one ignored the fence notice (it
// named its own number); a delivery counted 1 loaded no journal, so every
// completed call ran again; and its events had the earlier attempt's ids
// (<job>.<attempt>.<seq>), so the events stream dropped them as duplicates.

// recreateConsumer deletes queue's consumer and creates it again with the
// same settings: the server forgets every delivery of it.
func recreateConsumer(t *testing.T, nc *nats.Conn, queue string) {
	t.Helper()
	ctx := natstest.Context(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, Names{Prefix: DefaultPrefix}.JobsStream())
	if err != nil {
		t.Fatal(err)
	}
	name := Names{Prefix: DefaultPrefix}.Consumer(queue)
	cons, err := s.Consumer(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := cons.CachedInfo().Config
	if err := s.DeleteConsumer(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateConsumer(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}

// storedEvents returns "<attempt>/<worker>/<type>" of each stored event of
// job id, in order.
func storedEvents(t *testing.T, c *Client, id string) []string {
	t.Helper()
	var out []string
	for _, ev := range jobEvents(t, c, id) {
		out = append(out, fmt.Sprintf("%d/%s/%s", ev.Attempt, ev.Worker, ev.Type))
	}
	return out
}

// The earlier attempt is alive: the delivery counted again is handed back
// (never two attempts at once), and the job runs once.
func TestDeliveryCountedAgainWhileTheAttemptIsAlive(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, startServer(t))
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	var mu sync.Mutex
	var runs []string
	runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
		mu.Lock()
		runs = append(runs, fmt.Sprintf("%s#%d", env.WorkerID(), env.Attempt()))
		mu.Unlock()
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return &Outcome{Result: agentloop.Result{Answer: "done by " + env.WorkerID()}}, nil
	})
	log, handedBack := logSignal("job held by a live attempt; handing the delivery back")
	startWorker(t, nc, Config{Runner: runner, WorkerID: "first", Concurrency: 1})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	if _, err := c.Submit(ctx, &Job{ID: "recount-alive", Task: "x"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the job did not start")
	}
	recreateConsumer(t, nc, DefaultQueue)
	startWorker(t, nc, Config{Runner: runner, WorkerID: "second", Logger: log})
	select {
	case <-handedBack:
	case <-started:
		t.Error("a second attempt started while the first runs")
	case <-ctx.Done():
		t.Fatal("the delivery counted again was not handed back")
	}
	close(release)
	st := waitStatus(t, c, "recount-alive")
	if st.Status != StatusSucceeded || st.Result.Answer != "done by first" || st.Attempt != 1 {
		t.Errorf("state %s attempt %d, result %+v", st.Status, st.Attempt, st.Result)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(runs, ",") != "first#1" {
		t.Errorf("the job ran as %v, want once, first#1", runs)
	}
}

// The earlier attempt is gone, having completed a call: the delivery
// counted again runs as the next attempt, from the journal (the call is
// not run again), and its events are stored.
func TestDeliveryCountedAgainAfterTheAttemptIsGone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// handBack: the first attempt is handed back at shutdown (state
		// queued); otherwise it is fenced and leaves its state running.
		handBack bool
	}{
		{"handed back", true},
		{"left running", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			nc := natstest.Connect(t, startServer(t))
			id := "recount-" + strings.ReplaceAll(tc.name, " ", "-")
			var writes atomic.Int32
			called := make(chan struct{}, 1)
			runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
				prior, err := env.LoadJournal(ctx)
				if err != nil {
					return nil, Retryable(err)
				}
				j, err := journal.New(env.Journal(), prior)
				if err != nil {
					return nil, err
				}
				_, status, err := j.Do(ctx, "c1.0", journal.Call{Name: "write", Args: json.RawMessage(`{}`), IdempotencyKey: job.ID + "/c1"},
					func(context.Context) (journal.Result, error) {
						writes.Add(1)
						return journal.Result{Text: "written"}, nil
					})
				if err != nil {
					return nil, err
				}
				if env.WorkerID() == "first" {
					called <- struct{}{}
					<-ctx.Done()
					return nil, ctx.Err()
				}
				return &Outcome{Result: agentloop.Result{Answer: status.String()}}, nil
			})
			first, stopFirst := startWorkerWith(t, nc, Config{Runner: runner, WorkerID: "first", ShutdownGrace: 10 * time.Millisecond}, nil)
			c := newClient(t, nc)
			ctx := natstest.Context(t)
			if _, err := c.Submit(ctx, &Job{ID: id, Task: "x"}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-called:
			case <-ctx.Done():
				t.Fatal("the call did not run")
			}
			if tc.handBack {
				stopFirst()
				waitStatus(t, c, id, StatusQueued)
			} else {
				// As a worker cut off from NATS: its attempt fences itself
				// and leaves the state as it is.
				first.mu.Lock()
				r := first.running[id]
				first.mu.Unlock()
				r.fence(fmt.Errorf("test: cut off"))
				stopFirst()
			}
			recreateConsumer(t, nc, DefaultQueue)
			startWorker(t, nc, Config{Runner: runner, WorkerID: "second"})
			st := waitStatus(t, c, id)
			if st.Status != StatusSucceeded || st.Attempt != 2 || st.Result.Answer != journal.Replayed.String() {
				t.Errorf("state %s attempt %d (%s), result %+v; want succeeded on attempt 2, the call replayed",
					st.Status, st.Attempt, st.Error, st.Result)
			}
			if n := writes.Load(); n != 1 {
				t.Errorf("the completed call ran %d times", n)
			}
			evs := storedEvents(t, c, id)
			if !strings.Contains(strings.Join(evs, " "), "2/second/started") {
				t.Errorf("stored events %v lack the second attempt's started event", evs)
			}
		})
	}
}
