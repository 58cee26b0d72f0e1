package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/jobs/jobstest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// TestSilentWorkerReported: a job whose worker was killed mid-job (kill -9)
// stays "running" in its state until the ack wait hands it to another
// worker; with none, submit and watch waited in silence for ever (seen on a
// stock nats-server). Following such a job now says, once, that its worker
// does not answer and what happens to the job; a job whose worker answers
// gets no such line.
func TestSilentWorkerReported(t *testing.T) {
	nc, _ := startWorker(t)
	ctx := natstest.Context(t)
	kv := stateBucket(t, nc)
	const notice = "does not answer: it may have stopped"

	t.Run("worker gone", func(t *testing.T) {
		t.Parallel()
		// What a worker killed mid-job leaves: its running state, and
		// nothing answering for the job.
		st := `{"id":"killed-1","queue":"default","status":"running","attempt":2,"worker":"gone-w","task":"x"}`
		if _, err := kv.Put(ctx, "killed-1", []byte(st)); err != nil {
			t.Fatal(err)
		}
		runCtx, interrupt := context.WithCancel(context.Background())
		defer interrupt()
		stderr := newWatchBuffer(notice)
		done := runAsync(runCtx, stderr, "watch", "killed-1")
		select {
		case <-stderr.seen:
		case res := <-done:
			t.Fatalf("watch ended first: %+v", res)
		case <-time.After(aliveEvery + time.Minute):
			t.Fatalf("no notice of the silent worker:\n%s", stderr.String())
		}
		interrupt()
		res := <-done
		want := "submit: worker gone-w running job killed-1 (attempt 2) does not answer: it may have stopped. " +
			"The job is not lost: after the ack wait (JETAGENT_ACK_WAIT) a worker of queue default runs it again"
		if res.code != 1 || !strings.Contains(res.stderr, want) || strings.Count(res.stderr, notice) != 1 {
			t.Errorf("want exit 1 and once %q\ngot %+v", want, res)
		}
	})

	t.Run("worker answers", func(t *testing.T) {
		t.Parallel()
		runCtx, interrupt := context.WithCancel(context.Background())
		defer interrupt()
		stderr := newWatchBuffer("blocking")
		done := runAsync(runCtx, stderr, "--id", "alive-1", "block")
		select {
		case <-stderr.seen:
		case res := <-done:
			t.Fatalf("submit ended first: %+v", res)
		case <-time.After(time.Minute):
			t.Fatalf("the job did not start:\n%s", stderr.String())
		}
		// Past two liveness requests, each answered by the worker.
		time.Sleep(2*aliveEvery + aliveWait)
		if res := submitCmd(t, "", "cancel", "alive-1"); res.code != 0 {
			t.Errorf("cancel: %+v", res)
		}
		res := <-done
		if strings.Contains(res.stderr, notice) || !strings.Contains(res.stderr, "cancelled") {
			t.Errorf("a live worker reported silent, or no cancel: %+v", res)
		}
	})
}

// TestNoWorkerReported: a job submitted while no worker runs (all stopped,
// or killed) waited queued in silence; following it now says, once, that
// no worker is running, and the job runs when one starts.
func TestNoWorkerReported(t *testing.T) {
	s, err := jobs.StartEmbedded(jobs.EmbeddedConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	nc := natstest.Connect(t, s)
	t.Setenv("NATS_URL", s.ClientURL())
	// A worker that served the queue and stopped: the queue's consumer
	// stays, so submit's "no worker has served queue" is not what tells.
	cfg := jobs.Config{Conn: nc, Runner: &echoRunner{runs: map[string]int{}}, WorkerID: "gone", ShutdownGrace: time.Second}
	serveAndStop(t, cfg)

	const notice = "submit: no worker is running (none answers on agent.alive.*): job idle-1 waits queued until a worker of queue default starts"
	runCtx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	stderr := newWatchBuffer(notice)
	res := runAsync(runCtx, stderr, "--id", "idle-1", "hello")
	select {
	case <-stderr.seen:
	case r := <-res:
		t.Fatalf("submit ended first: %+v", r)
	case <-time.After(aliveEvery + time.Minute):
		t.Fatalf("no notice of the missing worker:\n%s", stderr.String())
	}
	cfg.WorkerID = "back"
	jobstest.RunWorker(t, cfg)
	select {
	case r := <-res:
		if r.code != 0 || strings.Count(r.stderr, "no worker is running") != 1 {
			t.Errorf("want exit 0 and one notice, got %+v", r)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the job did not end once a worker started:\n%s", stderr.String())
	}
}

// serveAndStop runs a worker of cfg until it is ready, then stops it: its
// queue's consumer stays, as a worker that served and went away leaves it.
func serveAndStop(t *testing.T, cfg jobs.Config) {
	t.Helper()
	w, err := jobs.NewWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	select {
	case <-w.Ready():
	case err := <-done:
		t.Fatalf("worker did not start: %v", err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
