package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/natstest"
)

// holdRunner signals when it starts and when its context ends, then
// returns only once released: a job still busy after its worker's
// shutdown grace (a tool that takes a moment to stop).
type holdRunner struct{ started, stopping, release chan struct{} }

func (r *holdRunner) Run(ctx context.Context, _ *Job, _ RunEnv) (*Outcome, error) {
	close(r.started)
	<-ctx.Done()
	close(r.stopping)
	<-r.release
	return nil, ctx.Err()
}

// TestCancelWhileShuttingDown: a cancel that reaches a job while its
// worker shuts down ends the job cancelled, whether it lands in the
// shutdown grace or after it (when the job was already being handed back):
// the job is not requeued for a later worker to cancel, and `submit
// cancel` does not wait in vain when no other worker is up.
func TestCancelWhileShuttingDown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		grace time.Duration
		// afterGrace: the cancel comes once the grace is over and the
		// job's context has ended for the shutdown.
		afterGrace bool
	}{
		{"in the grace", time.Minute, false},
		{"after the grace", time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			nc := natstest.Connect(t, s)
			r := &holdRunner{started: make(chan struct{}), stopping: make(chan struct{}), release: make(chan struct{})}
			_, stop := startWorker(t, nc, Config{Runner: r, ShutdownGrace: tt.grace})
			c := newClient(t, nc)
			ctx := natstest.Context(t)
			if _, err := c.Submit(ctx, &Job{ID: "sigterm", Task: "x"}); err != nil {
				t.Fatal(err)
			}
			recvOrFail(t, r.started)
			stopped := make(chan struct{})
			go func() { stop(); close(stopped) }() // SIGTERM
			if tt.afterGrace {
				recvOrFail(t, r.stopping)
			} else {
				close(r.release) // the job returns as soon as it is cancelled
			}
			type cancelled struct {
				st  *State
				err error
			}
			done := make(chan cancelled, 1)
			// Below natstest's bound, so that a cancel waiting in vain
			// (for a requeued job no worker runs) fails here; the margin
			// is for a loaded machine.
			cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			go func() { st, err := c.Cancel(cctx, "sigterm"); done <- cancelled{st, err} }()
			if tt.afterGrace {
				if _, err := c.states.wait(ctx, "sigterm", func(s *State) bool { return s.CancelRequested }); err != nil {
					t.Fatal(err)
				}
				close(r.release)
			}
			got := recvOrFail(t, done)
			recvOrFail(t, stopped)
			if got.err != nil || got.st.Status != StatusCancelled {
				t.Fatalf("cancel: %+v, %v; want cancelled", got.st, got.err)
			}
			st, err := c.Status(ctx, "sigterm")
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != StatusCancelled || st.Error != "cancelled on request" || st.Attempt != 1 {
				t.Errorf("state %s (%q, attempt %d), want cancelled on request in attempt 1", st.Status, st.Error, st.Attempt)
			}
			waitEmpty(t, nc, c) // acknowledged: no later worker runs it
		})
	}
}

func recvOrFail[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatal("timed out waiting")
		panic("unreachable")
	}
}
