package jobs

import (
	"context"
	"testing"
	"time"

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
	deleteStream := func(name func(Names) string) func(ctx context.Context, js jetstream.JetStream, n Names) error {
		return func(ctx context.Context, js jetstream.JetStream, n Names) error { return js.DeleteStream(ctx, name(n)) }
	}
	for _, tt := range []struct {
		name   string
		remove func(ctx context.Context, js jetstream.JetStream, n Names) error
		// check is the worker's AssetCheck: 0 for the default (10 s, so the
		// fetch that failed or the job's failed claim finds the loss)
		check time.Duration
	}{
		{"jobs stream", func(ctx context.Context, js jetstream.JetStream, n Names) error {
			return js.DeleteStream(ctx, n.JobsStream())
		}, 0},
		{"queue consumer", func(ctx context.Context, js jetstream.JetStream, n Names) error {
			return js.DeleteConsumer(ctx, n.JobsStream(), n.Consumer(DefaultQueue))
		}, 0},
		{"dead-letterer's consumer", func(ctx context.Context, js jetstream.JetStream, n Names) error {
			return js.DeleteConsumer(ctx, n.AdvisoryStream(), n.AdvisoryConsumer())
		}, 0},
		// Removed while no job runs: the periodic look finds them
		// (nats kv del AGENT_STATE, nats stream rm AGENT_EVENTS, ...).
		{"state bucket", func(ctx context.Context, js jetstream.JetStream, n Names) error {
			return js.DeleteKeyValue(ctx, n.StateBucket())
		}, 50 * time.Millisecond},
		// Found by the job's claim, which failed: handed back, the job
		// came back to a state bucket that was still gone until its
		// deliveries ran out.
		{"state bucket, no periodic look", func(ctx context.Context, js jetstream.JetStream, n Names) error {
			return js.DeleteKeyValue(ctx, n.StateBucket())
		}, -1},
		{"events stream", deleteStream(Names.EventsStream), 50 * time.Millisecond},
		{"dead-letter stream", deleteStream(Names.DLQStream), 50 * time.Millisecond},
		{"advisories stream", deleteStream(Names.AdvisoryStream), 50 * time.Millisecond},
		{"journal bucket", func(ctx context.Context, js jetstream.JetStream, n Names) error {
			return js.DeleteKeyValue(ctx, n.JournalBucket())
		}, 50 * time.Millisecond},
		{"transcripts bucket", func(ctx context.Context, js jetstream.JetStream, n Names) error {
			return js.DeleteObjectStore(ctx, n.TranscriptBucket())
		}, 50 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			nc := natstest.Connect(t, s)
			logs, logger := newRecordLog()
			startWorker(t, nc, Config{Runner: newTestRunner(), UnservedCheck: -1, AssetCheck: tt.check, Logger: logger})
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
			var second uint64
			if tt.check < 0 {
				second = publish("second") // its claim finds the loss
			}
			if _, err := logs.wait(ctx, "JetStream assets created again"); err != nil {
				t.Fatal(err)
			}
			if tt.check >= 0 {
				second = publish("second")
			}
			if second == first {
				t.Fatalf("the recreated stream gave the second job the first one's sequence %d", first)
			}
			st := waitStatus(t, c, GeneratedID(second))
			if st.Status != StatusSucceeded || st.Result == nil || st.Result.Answer != "second" || st.Result.Transcript == "" {
				t.Fatalf("second job (%s): %+v; want it run, its transcript stored", GeneratedID(second), st)
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

// TestHandBackWhenTheStateIsGone: a running job handed back (a retryable
// error) after its state was purged under it stores a new state, queued,
// and its retry event goes out before the delivery goes back. Before, the
// missing state was taken for another attempt's hold: the delivery was
// left, without its retry event, to come back only after its ack wait.
func TestHandBackWhenTheStateIsGone(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	release := make(chan struct{})
	runner := firstAttemptGated(release, nil, true)
	rec, log := newRecordLog()
	// An ack wait no test waits out: without the fix the job comes back
	// only after it.
	startWorker(t, nc, Config{Runner: runner, Logger: log, UnservedCheck: -1,
		Topology: TopologyConfig{AckWait: 10 * time.Minute}})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	const id = "purged-then-retried"
	if _, err := c.Submit(ctx, &Job{ID: id, Task: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rec.wait(ctx, "job started"); err != nil {
		t.Fatal(err)
	}
	if err := c.topo.State.Purge(ctx, id); err != nil {
		t.Fatal(err)
	}
	close(release)
	st := waitStatus(t, c, id)
	if st.Status != StatusSucceeded || st.Attempt != 2 {
		t.Fatalf("state %+v; want succeeded by attempt 2", st)
	}
	types := attemptEventTypes(t, nc, c, id, 1)
	if len(types) == 0 || types[len(types)-1] != EventRetry {
		t.Errorf("attempt 1's events %v do not end with its %s", types, EventRetry)
	}
}
