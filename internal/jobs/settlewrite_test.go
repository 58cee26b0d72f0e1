package jobs

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/natstest"
)

// recordHandler keeps every log record's message and closes ch the first
// time one is want.
type recordHandler struct {
	want string
	ch   chan struct{}
	once sync.Once
	mu   sync.Mutex
	msgs []string
}

func recordingLog(want string) (*slog.Logger, *recordHandler) {
	h := &recordHandler{want: want, ch: make(chan struct{})}
	return slog.New(h), h
}

func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs = append(h.msgs, r.Message)
	h.mu.Unlock()

	if r.Message == h.want {
		h.once.Do(func() { close(h.ch) })
	}
	return nil
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordHandler) WithGroup(string) slog.Handler            { return h }

func (h *recordHandler) logged(msg string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Contains(h.msgs, msg)
}

// Log lines of the settling path.
const (
	logFinished  = "job finished"
	logHandedOn  = "job handed back"
	logElsewhere = "job held or settled by another attempt; leaving it"
	logNotStored = "final state could not be stored; handing the job back"
)

// A state write on a job's settling path whose request, or answer, a NATS
// server restart swallowed (the server took it and was killed) costs one
// try, not the job: the final state, or the hand-back, is tried again at
// once the connection is back. The final write used to be one try of
// 10 s: it waited out its bound, logged "job settled elsewhere; leaving
// it", and the job came back only after its ack wait (a second attempt,
// replayed from the journal); when the answer was lost, the state was
// final but its terminal event never went out and the delivery was never
// acknowledged. A state that another attempt holds is still left, and
// said so.
func TestStateWriteLostInARestart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// retry: the first attempt fails with a retryable error (the
		// hand-back's write is the one lost).
		retry bool
		// lose: what the proxy swallows: the request (the write did not
		// land), the answer (it landed), or nothing ("" : another party
		// takes the job over before the write).
		lose     string
		want     Status
		attempt  int
		wantLog  string
		neverLog []string
	}{
		{"final, request lost", false, "request", StatusSucceeded, 1, logFinished, []string{logElsewhere, logNotStored}},
		{"final, answer lost", false, "answer", StatusSucceeded, 1, logFinished, []string{logElsewhere, logNotStored}},
		{"hand back, request lost", true, "request", StatusSucceeded, 2, logFinished, []string{logElsewhere}},
		{"hand back, answer lost", true, "answer", StatusSucceeded, 2, logFinished, []string{logElsewhere}},
		{"final, taken over", false, "", StatusRunning, 2, logElsewhere, []string{logNotStored, logFinished}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := "lost-" + strings.NewReplacer(",", "", " ", "-").Replace(tc.name)
			s := startServer(t)
			var opts []func(*dropProxy)
			switch tc.lose {
			case "request":
				opts = append(opts, dropMatching("$KV."+(Names{Prefix: DefaultPrefix}).StateBucket()+"."+id, false))
			case "answer":
				opts = append(opts, dropMatching(`"stream":"KV_`+(Names{Prefix: DefaultPrefix}).StateBucket()+`"`, true))
			}
			p := startDropProxy(t, s.Addr().String(), opts...)
			wnc, err := nats.Connect(p.url(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(wnc.Close)
			started := make(chan int, 2)
			release := make(chan struct{})
			var mu sync.Mutex
			runs := 0
			gated := firstAttemptGated(release, started, tc.retry)
			runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
				mu.Lock()
				runs++
				mu.Unlock()
				return gated(ctx, job, env)
			})
			log, rec := recordingLog(tc.wantLog)
			// An ack wait above a lost try (stateTryTimeout): the settling
			// path no longer heartbeats, and a redelivery meanwhile would
			// be handed back (this worker runs the job), counting one more.
			startWorker(t, wnc, Config{Runner: runner, WorkerID: "w1", Logger: log,
				Topology: TopologyConfig{AckWait: 3 * stateTryTimeout, MaxDeliver: 3}})
			c := newClient(t, natstest.Connect(t, s))
			ctx := natstest.Context(t)
			if _, err := c.Submit(ctx, &Job{ID: id, Task: "x"}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-started:
			case <-ctx.Done():
				t.Fatal("the job did not start")
			}
			if tc.lose == "" {
				// Another attempt takes the job over (as after a
				// redelivery this attempt did not answer).
				if _, err := c.states.update(ctx, id, func(cur *State) (*State, error) {
					cur.Attempt, cur.Worker = 2, "w2"
					return cur, nil
				}); err != nil {
					t.Fatal(err)
				}
			} else {
				p.dropping.Store(true)
			}
			begin := time.Now()
			close(release)
			if tc.lose != "" {
				select {
				case <-p.dropped:
				case <-ctx.Done():
					t.Fatal("nothing was swallowed")
				}
				p.cut() // the server "restarted": the clients reconnect
			}
			select {
			case <-rec.ch:
			case <-ctx.Done():
				t.Fatalf("no %q logged; logged %v", tc.wantLog, rec.msgs)
			}
			if d := time.Since(begin); d >= stateOpBound {
				t.Errorf("settled after %s, the state write's whole bound", d.Round(time.Millisecond))
			}
			st, _, err := c.states.get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != tc.want || st.Attempt != tc.attempt {
				t.Errorf("state %s attempt %d (%s), want %s attempt %d", st.Status, st.Attempt, st.Error, tc.want, tc.attempt)
			}
			for _, m := range tc.neverLog {
				if rec.logged(m) {
					t.Errorf("logged %q", m)
				}
			}
			if tc.want.Terminal() {
				// The terminal event went out (the delivery was settled,
				// not left to its ack wait).
				evs := watchEvents(t, c, id)
				if last := evs[len(evs)-1]; last.Type != string(tc.want) || last.Attempt != tc.attempt {
					t.Errorf("last event %s of attempt %d", last.Type, last.Attempt)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if want := tc.attempt; tc.lose == "" {
				if runs != 1 {
					t.Errorf("ran %d times", runs)
				}
			} else if runs != want {
				t.Errorf("ran %d times, want %d", runs, want)
			}
		})
	}
}
