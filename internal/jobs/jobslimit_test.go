package jobs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// An operator's limit on the jobs stream (max_msgs, max_bytes) with the
// default discard policy, old, dropped the oldest queued jobs when it was
// reached: their states said queued for ever and nobody was told (a
// probe with a stock nats-server: 5 jobs on a queue no worker served,
// max_msgs 3, two gone). The jobs stream now discards new: the job over
// the limit is refused to its submitter, the stored ones stay. An older
// stream is updated to it, its limit kept.
func TestJobsStreamLimitRefusesNewJobs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		older bool // the stream existed, with discard old, before EnsureTopology
	}{
		{"created", false},
		{"older stream", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			nc := natstest.Connect(t, s)
			ctx := natstest.Context(t)
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			n := Names{Prefix: DefaultPrefix}
			limited := jetstream.StreamConfig{
				Name: n.JobsStream(), Subjects: []string{n.JobsSubject("*")}, Retention: jetstream.WorkQueuePolicy,
				Storage: jetstream.FileStorage, Duplicates: DefaultDuplicateWindow, MaxMsgs: 2,
			}
			if tc.older {
				if _, err := js.CreateStream(ctx, limited); err != nil {
					t.Fatal(err)
				}
			}
			var logs []string
			if _, err := EnsureTopology(ctx, js, TopologyConfig{}, func(f string, a ...any) {
				logs = append(logs, fmt.Sprintf(f, a...))
			}); err != nil {
				t.Fatal(err)
			}
			st, err := js.Stream(ctx, n.JobsStream())
			if err != nil {
				t.Fatal(err)
			}
			cfg := st.CachedInfo().Config
			if tc.older {
				if cfg.MaxMsgs != 2 {
					t.Errorf("the operator's max_msgs became %d", cfg.MaxMsgs)
				}
				if joined := strings.Join(logs, "\n"); !strings.Contains(joined, "updated stream AGENT_JOBS, which had discard old (want new") {
					t.Errorf("the update was not logged: %q", joined)
				}
			} else {
				cfg.MaxMsgs = 2 // the operator's edit
				if _, err := js.UpdateStream(ctx, cfg); err != nil {
					t.Fatal(err)
				}
			}
			if cfg.Discard != jetstream.DiscardNew {
				t.Errorf("jobs stream discards %s", cfg.Discard)
			}
			c := newClient(t, nc)
			for i := 1; i <= 3; i++ {
				id := fmt.Sprintf("lim-%d", i)
				_, err := c.Submit(ctx, &Job{ID: id, Task: "x", Queue: "unserved"})
				if i <= 2 && err != nil {
					t.Fatalf("submit %s: %v", id, err)
				}
				if i == 3 && err == nil {
					t.Errorf("submit %s over the limit was accepted", id)
				}
			}
			msgs := streamMsgs(t, nc, n.JobsStream(), "")
			var ids []string
			for _, m := range msgs {
				ids = append(ids, m.Header.Get("Nats-Msg-Id"))
			}
			if strings.Join(ids, ",") != "lim-1,lim-2" {
				t.Errorf("the jobs stream holds %v, want lim-1 and lim-2", ids)
			}
		})
	}
}
