package jobs

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestConsumerFilterPutBack: a queue's consumer whose filter was changed
// under running workers (nats consumer edit AGENT_JOBS workers-default
// --filter ..., or --filter "" for every queue's jobs) took none of the
// queue's jobs, which waited queued with nothing logged until a worker
// started again. The running worker now puts the filter back at its next
// look at the consumers, says so, and the job runs.
func TestConsumerFilterPutBack(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, filter string }{
		{"another queue", "agent.jobs.elsewhere"},
		{"every queue", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			nc := natstest.Connect(t, s)
			logs, logger := newRecordLog()
			startWorker(t, nc, Config{Runner: newTestRunner(), UnservedCheck: -1, AssetCheck: 50 * time.Millisecond, Logger: logger})
			c := newClient(t, nc)
			ctx := natstest.Context(t)
			cons, err := c.topo.Jobs.Consumer(ctx, c.names.Consumer(DefaultQueue))
			if err != nil {
				t.Fatal(err)
			}
			cfg := cons.CachedInfo().Config
			cfg.FilterSubject = tt.filter
			if _, err := c.topo.Jobs.UpdateConsumer(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Submit(ctx, &Job{ID: "after-filter-edit", Task: "echo:ran"}); err != nil {
				t.Fatal(err)
			}
			if st := waitStatus(t, c, "after-filter-edit"); st.Status != StatusSucceeded || st.Result.Answer != "ran" {
				t.Fatalf("state %+v; want it run", st)
			}
			if _, err := logs.wait(ctx, "so its jobs reached no worker; put back"); err != nil {
				t.Fatal(err)
			}
			info, err := cons.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.Config.FilterSubject != c.names.JobsSubject(DefaultQueue) || info.Config.AckPolicy != jetstream.AckExplicitPolicy {
				t.Errorf("consumer config after: %+v", info.Config)
			}
		})
	}
}
