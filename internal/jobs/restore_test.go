package jobs

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestTopologyRestored: a worker whose jobs stream or consumer is removed
// while it runs (nats stream rm AGENT_JOBS, which ensureStream advises
// for a setting that cannot change in place; nats consumer rm) creates
// them again and takes the next job. Before, it logged "fetch failed" once
// a FetchWait for ever and submitters were told no stream existed. A job
// published without an id to the recreated stream runs: the stream counts
// on from the time, so the job's generated id is not that of the job the
// first stream had at the same sequence (it was taken for a redelivery of
// that ended job and acknowledged unrun).
func TestTopologyRestored(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		remove func(ctx context.Context, js jetstream.JetStream, n Names) error
	}{
		{"jobs stream", func(ctx context.Context, js jetstream.JetStream, n Names) error {
			return js.DeleteStream(ctx, n.JobsStream())
		}},
		{"queue consumer", func(ctx context.Context, js jetstream.JetStream, n Names) error {
			return js.DeleteConsumer(ctx, n.JobsStream(), n.Consumer(DefaultQueue))
		}},
		{"dead-letterer's consumer", func(ctx context.Context, js jetstream.JetStream, n Names) error {
			return js.DeleteConsumer(ctx, n.AdvisoryStream(), n.AdvisoryConsumer())
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			nc := natstest.Connect(t, s)
			logs, logger := newRecordLog()
			startWorker(t, nc, Config{Runner: newTestRunner(), UnservedCheck: -1, Logger: logger})
			c := newClient(t, nc)
			ctx := natstest.Context(t)
			js := c.topo.JS
			publish := func(task string) uint64 {
				t.Helper()
				ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: c.names.JobsSubject(DefaultQueue), Data: []byte(`{"task":"echo:` + task + `"}`)})
				if err != nil {
					t.Fatal(err)
				}
				return ack.Sequence
			}
			first := publish("first")
			if st := waitStatus(t, c, GeneratedID(first)); st.Status != StatusSucceeded {
				t.Fatalf("first job: %+v", st)
			}
			if err := tt.remove(ctx, js, c.names); err != nil {
				t.Fatal(err)
			}
			if _, err := logs.wait(ctx, "JetStream assets created again"); err != nil {
				t.Fatal(err)
			}
			second := publish("second")
			if second == first {
				t.Fatalf("the recreated stream gave the second job the first one's sequence %d", first)
			}
			st := waitStatus(t, c, GeneratedID(second))
			if st.Status != StatusSucceeded || st.Result == nil || st.Result.Answer != "second" {
				t.Fatalf("second job (%s): %+v; want it run", GeneratedID(second), st)
			}
		})
	}
}

// TestOutcomeKeptWhenTheStateIsGone: a running job whose state is purged
// under it (nats kv purge AGENT_STATE ID, or a NATS server back without
// its store) stores its outcome in a new state. Before, the attempt took
// the missing state for another attempt's hold ("job held or settled by
// another attempt; leaving it") and the outcome was lost.
func TestOutcomeKeptWhenTheStateIsGone(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	r := newTestRunner()
	startWorker(t, nc, Config{Runner: r, UnservedCheck: -1})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	const id = "purged-while-running"
	if _, err := c.Submit(ctx, &Job{ID: id, Task: "gate:purged"}); err != nil {
		t.Fatal(err)
	}
	r.waitStarted(t, 1)
	if err := c.topo.State.Purge(ctx, id); err != nil {
		t.Fatal(err)
	}
	r.release("purged")
	st := waitStatus(t, c, id)
	if st.Status != StatusSucceeded || st.Result == nil || st.Result.Answer != "purged" || st.Attempt != 1 || st.StreamSeq == 0 {
		t.Fatalf("state %+v; want succeeded with the answer, attempt 1 and the message's sequence", st)
	}
}
