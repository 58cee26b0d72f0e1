package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/jobs/jobstest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// startIdleDeployment starts an embedded server on which a worker served
// queue default and stopped (its consumer stays, so no "no worker has
// served" warning tells anything) and points the command at it. other,
// when set, is a worker left running that serves only that queue.
func startIdleDeployment(t *testing.T, other string) (*nats.Conn, jobs.Config) {
	t.Helper()
	s, err := jobs.StartEmbedded(jobs.EmbeddedConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	nc := natstest.Connect(t, s)
	t.Setenv("NATS_URL", s.ClientURL())
	cfg := jobs.Config{Conn: nc, Runner: &echoRunner{runs: map[string]int{}}, WorkerID: "gone", ShutdownGrace: time.Second,
		FetchWait: 200 * time.Millisecond}
	serveAndStop(t, cfg)
	if other != "" {
		o := cfg
		o.WorkerID, o.Topology.Queues = "other", []string{other}
		jobstest.RunWorker(t, o)
	}
	return nc, cfg
}

// waitFor waits until ch is closed (a watchBuffer saw its text), failing
// with what the command wrote when it ends first or after limit.
func waitFor(t *testing.T, seen <-chan struct{}, done <-chan result, stderr *watchBuffer, limit time.Duration, what string) {
	t.Helper()
	select {
	case <-seen:
	case r := <-done:
		t.Fatalf("submit ended before %s: %+v", what, r)
	case <-time.After(limit):
		t.Fatalf("no %s:\n%s", what, stderr.String())
	}
}

// TestBatchStallsReported: a batch waiting for its jobs while no worker
// ran waited in silence (its progress said nothing more), while one job
// followed is told within about 10 s that no worker is running. The batch
// now says so once, and its jobs run when a worker starts.
func TestBatchStallsReported(t *testing.T) {
	_, cfg := startIdleDeployment(t, "")
	file := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(file, []byte("\"echo:a\"\n\"echo:b\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const notice = "submit: no worker is running (none answers on agent.alive.*): the batch's queued jobs wait until a worker of their queue starts"
	runCtx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	stderr := newWatchBuffer(notice)
	done := runAsync(runCtx, stderr, "--file", file)
	waitFor(t, stderr.seen, done, stderr, aliveEvery+time.Minute, "notice of the missing worker")
	cfg.WorkerID = "back"
	jobstest.RunWorker(t, cfg)
	select {
	case r := <-done:
		if r.code != 0 || strings.Count(r.stderr, "no worker is running") != 1 || !strings.Contains(r.stderr, "2 jobs: 2 succeeded") {
			t.Errorf("want exit 0, both jobs run and one notice, got %+v", r)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the batch did not end once a worker started:\n%s", stderr.String())
	}
}

// TestQueuedMessageGoneReported: a queued job whose message left the
// jobs stream (nats stream purge, rmm, or rm, which a refused setting
// advises) is run by no worker, its state queued for ever; submit watch,
// a batch and a resubmission of its id waited for it in silence. They now
// say so, once, and how to go on; a cancel ends the wait.
func TestQueuedMessageGoneReported(t *testing.T) {
	nc, _ := startIdleDeployment(t, "other") // "other" recreates a removed stream
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv := stateBucket(t, nc)
	names := jobs.Names{}
	// queued is the job's state once it names its message.
	queued := func(ctx context.Context, t *testing.T, id string) *jobs.State {
		t.Helper()
		w, err := kv.Watch(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = w.Stop() }()
		for e := range w.Updates() {
			var st jobs.State
			if e != nil && json.Unmarshal(e.Value(), &st) == nil && st.StreamSeq != 0 {
				return &st
			}
		}
		t.Fatalf("no state of %s with its stream sequence", id)
		return nil
	}
	const notice = "is no longer in the stream"
	type lostCase struct {
		name string
		// batch: a batch submits the job and waits; else submit --detach, then watch
		batch bool
		lose  func(ctx context.Context, t *testing.T, st *jobs.State)
	}
	check := func(t *testing.T, tt lostCase) {
		ctx := natstest.Context(t)
		id := "lost-" + strings.ReplaceAll(tt.name, " ", "-")
		queue := "q-" + id // its own queue: purged alone
		runCtx, interrupt := context.WithCancel(context.Background())
		defer interrupt()
		stderr := newWatchBuffer(notice)
		var done <-chan result
		if tt.batch {
			file := filepath.Join(t.TempDir(), "tasks.jsonl")
			if err := os.WriteFile(file, []byte(`{"id":"`+id+`","queue":"`+queue+`","task":"echo:x"}`+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			done = runAsync(runCtx, stderr, "--file", file)
			tt.lose(ctx, t, queued(ctx, t, id))
		} else {
			if r := submitCmd(t, "", "--detach", "--queue", queue, "--id", id, "echo:x"); r.code != 0 {
				t.Fatalf("submit: %+v", r)
			}
			tt.lose(ctx, t, queued(ctx, t, id))
			done = runAsync(runCtx, stderr, "watch", id)
		}
		want := "submit: job " + id + " is queued, but its message (AGENT_JOBS sequence "
		waitFor(t, stderr.seen, done, stderr, 2*aliveEvery+time.Minute, "notice of the lost message")
		if r := submitCmd(t, "", "cancel", id); r.code != 0 {
			t.Fatalf("cancel: %+v", r)
		}
		select {
		case r := <-done:
			if r.code != 1 || strings.Count(r.stderr, notice) != 1 || !strings.Contains(r.stderr, want) ||
				!strings.Contains(r.stderr, "submit cancel "+id+" ends it") || !strings.Contains(r.stderr, "cancelled") {
				t.Errorf("want exit 1 (cancelled) and once %q, got %+v", want, r)
			}
		case <-time.After(time.Minute):
			t.Fatalf("the wait did not end with the cancel:\n%s", stderr.String())
		}
	}
	t.Run("message", func(t *testing.T) {
		for _, tt := range []lostCase{
			{"purged", false, func(ctx context.Context, t *testing.T, st *jobs.State) {
				s, err := js.Stream(ctx, names.JobsStream())
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Purge(ctx, jetstream.WithPurgeSubject(names.JobsSubject(st.Queue))); err != nil {
					t.Fatal(err)
				}
			}},
			{"deleted under a batch", true, func(ctx context.Context, t *testing.T, st *jobs.State) {
				s, err := js.Stream(ctx, names.JobsStream())
				if err != nil {
					t.Fatal(err)
				}
				if err := s.DeleteMsg(ctx, st.StreamSeq); err != nil {
					t.Fatal(err)
				}
			}},
		} {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				check(t, tt)
			})
		}
	})
	// After the others: it takes their messages too.
	t.Run("stream removed", func(t *testing.T) {
		check(t, lostCase{"stream removed", false, func(ctx context.Context, t *testing.T, _ *jobs.State) {
			// Watched once a worker made it again: submit needs the stream.
			created, err := nc.SubscribeSync("$JS.EVENT.ADVISORY.STREAM.CREATED." + names.JobsStream())
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = created.Unsubscribe() }()
			if err := js.DeleteStream(ctx, names.JobsStream()); err != nil {
				t.Fatal(err)
			}
			if _, err := created.NextMsgWithContext(ctx); err != nil {
				t.Fatalf("the jobs stream was not created again: %v", err)
			}
		}})
	})
}
