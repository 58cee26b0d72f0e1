package jobs

import (
	"context"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/natstest"
)

// A timed-out job's state said only "job timed out after 5s", while the
// loop's error said what was cut short (the model's reply, or which tool):
// an operator had to read the events to tell a hung model from a hung
// tool. The state's reason now says it too.
func TestTimeoutSaysWhatWasCutShort(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	runner := RunnerFunc(func(ctx context.Context, job *Job, _ RunEnv) (*Outcome, error) {
		<-ctx.Done()
		return nil, &agentloop.StoppedError{Err: ctx.Err(), While: job.Task}
	})
	startWorker(t, nc, Config{Runner: runner})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	for _, tc := range []struct{ id, while, want string }{
		{"tool", "running the tool calls of round 1 (echo)", "job timed out after 200ms while running the tool calls of round 1 (echo)"},
		{"model", "waiting for the model's reply in round 2", "job timed out after 200ms while waiting for the model's reply in round 2"},
	} {
		if _, err := c.Submit(ctx, &Job{ID: tc.id, Task: tc.while, Timeout: "200ms"}); err != nil {
			t.Fatal(err)
		}
		if st := waitStatus(t, c, tc.id); st.Status != StatusFailed || st.Error != tc.want {
			t.Errorf("%s: %s %q, want failed %q", tc.id, st.Status, st.Error, tc.want)
		}
	}
}
