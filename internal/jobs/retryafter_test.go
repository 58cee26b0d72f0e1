package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/natstest"
)

// A provider's Retry-After (429 with "Retry-After: 3600") was not
// respected between deliveries: the job went back with the worker's own
// backoff (2 s, 4 s, ...), every delivery was refused again, and the job
// was dead-lettered after about 20 s, within the provider's wait (seen end
// to end by a helper). A runner error made with RetryableAfter now hands
// the job back for at least that long, at most MaxRetryAfter.
func TestRetryAfterDelaysTheHandBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		after     time.Duration
		min, most time.Duration
	}{
		{"the provider's wait", 10 * time.Minute, 10 * time.Minute, 10 * time.Minute},
		{"bounded", 5 * time.Hour, MaxRetryAfter, MaxRetryAfter},
		{"shorter than the backoff", time.Millisecond, 20 * time.Millisecond * 8 / 10, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			nc := natstest.Connect(t, s)
			ctx := natstest.Context(t)
			runner := RunnerFunc(func(context.Context, *Job, RunEnv) (*Outcome, error) {
				return nil, RetryableAfter(errors.New("provider returned 429: rate limited"), tc.after)
			})
			startWorker(t, nc, Config{Runner: runner, WorkerID: "w1"})
			c := newClient(t, nc)
			const id = "ra-1"
			sub, err := nc.SubscribeSync(c.names.EventsFilter(id))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = sub.Unsubscribe() }()
			if _, err := c.Submit(ctx, &Job{ID: id, Task: "x"}); err != nil {
				t.Fatal(err)
			}
			for {
				m, err := sub.NextMsg(waitTimeout)
				if err != nil {
					t.Fatalf("no retry event: %v", err)
				}
				var ev Event
				if err := json.Unmarshal(m.Data, &ev); err != nil {
					t.Fatal(err)
				}
				if ev.Type != EventRetry {
					continue
				}
				var data struct {
					DelayMS int64 `json:"delay_ms"`
				}
				if err := json.Unmarshal(ev.Data, &data); err != nil {
					t.Fatal(err)
				}
				if d := time.Duration(data.DelayMS) * time.Millisecond; d < tc.min || d > tc.most {
					t.Errorf("handed back for %s, want %s to %s", d, tc.min, tc.most)
				}
				return
			}
		})
	}
}
