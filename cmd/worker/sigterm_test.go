//go:build linux

package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// TestSIGTERMWithJobsInFlight: a worker process gets SIGTERM with four
// jobs running. It takes no new job; the two whose model answers within
// the grace period finish on it; the two still waiting when the grace
// period ends are handed back (requeued, with the reason) and a second
// worker finishes them, as it does a job submitted after the signal. The
// worker exits 0 soon after the grace period; no job is lost or run to the
// end twice, every event matches its schema, and no event of an attempt
// follows one of a later attempt.
func TestSIGTERMWithJobsInFlight(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*natstest.WaitTimeout)
	defer cancel()
	const grace = 8 * time.Second
	ns, nc := startCrashNATS(t)

	// Until the first worker is gone, "quick" jobs are answered once the
	// test releases them and "stuck" ones never (their request ends when
	// the worker gives up on it); then every request is answered at once.
	release := make(chan struct{})
	never := make(chan struct{})
	var firstGone atomic.Bool
	model := llmtest.NewServer(t)
	model.Handle(func(req llmtest.RecordedRequest) llmtest.Reply {
		task := req.Messages[len(req.Messages)-1].Content
		switch {
		case firstGone.Load():
			return llmtest.Reply{Content: "done " + task}
		case strings.HasPrefix(task, "quick"):
			return llmtest.Reply{Content: "done " + task, Block: release}
		default:
			return llmtest.Reply{Block: never}
		}
	})
	settings := []string{"NATS_URL=" + ns.ClientURL(), "OPENAI_BASE_URL=" + model.URL(),
		"JETAGENT_CONCURRENCY=4", fmt.Sprintf("JETAGENT_SHUTDOWN_GRACE=%s", grace)}
	first := startLoggedWorker(t, "first", processEnv(settings...))
	if _, err := first.waitLog(ctx, "worker ready"); err != nil {
		t.Fatal(err)
	}
	client, err := jobs.NewClient(ctx, nc, jobs.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	inFlight := []string{"quick-1", "quick-2", "stuck-1", "stuck-2"}
	for _, id := range inFlight {
		if _, err := client.Submit(ctx, &jobs.Job{ID: id, Task: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := model.WaitRequests(ctx, len(inFlight)); err != nil {
		t.Fatal(err)
	}

	signalled := time.Now()
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, err := first.waitLog(ctx, "shutting down"); err != nil {
		t.Fatal(err)
	}
	// Submitted after the signal: the stopping worker must not take it.
	if _, err := client.Submit(ctx, &jobs.Job{ID: "late", Task: "late"}); err != nil {
		t.Fatal(err)
	}
	close(release)
	for _, id := range []string{"quick-1", "quick-2"} {
		st, err := client.Wait(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != jobs.StatusSucceeded || st.Worker != "first" || st.Attempt != 1 || st.Result.Answer != "done "+id {
			t.Errorf("%s finished within the grace period as %+v", id, st)
		}
	}
	select {
	case <-first.done:
	case <-ctx.Done():
		t.Fatal("the worker did not exit after SIGTERM")
	}
	if first.err != nil {
		t.Errorf("worker exit after SIGTERM: %v", first.err)
	}
	if took := time.Since(signalled); took < grace {
		t.Errorf("the worker exited %s after SIGTERM, before its %s grace period ended with jobs running", took, grace)
	}
	for _, id := range []string{"stuck-1", "stuck-2", "late"} {
		st, err := client.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != jobs.StatusQueued {
			t.Errorf("%s after the worker stopped: %+v, want queued", id, st)
		}
		if strings.HasPrefix(id, "stuck") && !strings.Contains(st.Error, "worker first shut down") {
			t.Errorf("%s handed back without the reason: %q", id, st.Error)
		}
	}

	firstGone.Store(true)
	second := startLoggedWorker(t, "second", processEnv(settings...))
	for _, id := range []string{"stuck-1", "stuck-2", "late"} {
		st, err := client.Wait(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		wantAttempt := 2
		if id == "late" {
			wantAttempt = 1
		}
		if st.Status != jobs.StatusSucceeded || st.Worker != "second" || st.Attempt != wantAttempt {
			t.Errorf("%s: %+v, want succeeded on second, attempt %d", id, st, wantAttempt)
		}
	}

	// None lost, none finished twice; the handed-back ones say so.
	for _, id := range append(inFlight, "late") {
		evs := readJobEvents(t, ctx, nc, id)
		checkEventSchemas(t, evs)
		checkOneAttemptAtATime(t, evs)
		succeeded, requeued := 0, 0
		for _, e := range evs {
			switch e.Type {
			case jobs.EventSucceeded:
				succeeded++
			case jobs.EventRequeued:
				requeued++
			}
		}
		wantRequeued := 0
		if strings.HasPrefix(id, "stuck") {
			wantRequeued = 1
		}
		if succeeded != 1 || requeued != wantRequeued {
			t.Errorf("%s: %d succeeded and %d requeued events, want 1 and %d:\n%s", id, succeeded, requeued, wantRequeued, eventTrail(evs))
		}
	}
	// The model was asked once per attempt: quick jobs were not run again.
	asked := map[string]int{}
	for _, r := range model.Requests() {
		asked[r.Messages[len(r.Messages)-1].Content]++
	}
	if want := map[string]int{"quick-1": 1, "quick-2": 1, "stuck-1": 2, "stuck-2": 2, "late": 1}; fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Errorf("model requests per job %v, want %v", asked, want)
	}
	if err := second.stop(t, 15*time.Second); err != nil {
		t.Error(err)
	}
}
