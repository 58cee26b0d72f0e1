package jobs

import (
	"strings"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/natstest"
)

// A job cancelled between attempts (handed back after attempt 1) says so:
// it said "cancelled before it ran", though an attempt had run. Both ways
// of cancelling: Client.Cancel, and cancel_requested set on the state by
// hand (the README's compare-and-swap), obeyed at the next claim.
func TestCancelBetweenAttemptsSaysSo(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"client", "state"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			nc := natstest.Connect(t, s)
			r := newTestRunner()
			// The hand-back waits long enough for the cancel to come first
			// ("client"), or short enough for the test ("state").
			delay := time.Hour
			if how == "state" {
				delay = 500 * time.Millisecond
			}
			startWorker(t, nc, Config{Runner: r, RetryDelay: delay, RetryDelayMax: delay})
			c := newClient(t, nc)
			ctx := natstest.Context(t)
			if _, err := c.Submit(ctx, &Job{ID: "again", Task: "retry:busy"}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.states.wait(ctx, "again", func(st *State) bool { return st.Status == StatusQueued && st.Attempt >= 1 }); err != nil {
				t.Fatal(err)
			}
			if how == "client" {
				if _, err := c.Cancel(ctx, "again"); err != nil {
					t.Fatal(err)
				}
			} else {
				_, err := c.states.update(ctx, "again", func(cur *State) (*State, error) {
					if cur.Status.Terminal() {
						return nil, nil
					}
					cur.CancelRequested = true
					return cur, nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			st := waitStatus(t, c, "again", StatusCancelled)
			if !strings.Contains(st.Error, "between attempts, after attempt ") || strings.Contains(st.Error, "before it ran") {
				t.Errorf("error %q, want it to say the job was cancelled between attempts", st.Error)
			}
		})
	}
}
