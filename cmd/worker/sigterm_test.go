//go:build linux

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// TestSIGTERMWithJobsInFlight: a worker process gets SIGTERM with jobs
// running. It takes no new job (one submitted after the signal stays
// queued); jobs whose model answers within the grace period finish on it
// and the worker exits as soon as they have, without waiting out the
// grace; jobs still running when the grace period ends are handed back
// (requeued, with the reason) and a second worker finishes them, as it
// does the job submitted after the signal. The worker exits 0; no job is
// lost or run to the end twice, every event matches its schema, and no
// event of an attempt follows one of a later attempt.
//
// The two outcomes are two cases, not one shutdown: whether a job answered
// after the signal finishes before a grace timer fires is a race with the
// machine's speed. With the grace far longer than the test, the quick jobs
// always win it; the stuck ones never end on their own, so a short grace
// decides nothing but how long the test waits.
func TestSIGTERMWithJobsInFlight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		grace time.Duration
		// quick jobs are answered once the test releases them, after the
		// signal; stuck ones never while the first worker runs.
		quick, stuck []string
	}{
		{name: "answered within the grace", grace: time.Hour, quick: []string{"quick-1", "quick-2"}},
		{name: "running when the grace ends", grace: 2 * time.Second, stuck: []string{"stuck-1", "stuck-2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testSIGTERMWithJobsInFlight(t, tc.grace, tc.quick, tc.stuck)
		})
	}
}

func testSIGTERMWithJobsInFlight(t *testing.T, grace time.Duration, quick, stuck []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*natstest.WaitTimeout)
	defer cancel()
	ns, nc := startCrashNATS(t)

	// Until the first worker is gone, quick jobs are answered once the
	// test releases them and stuck ones never (their request ends when
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
		case slices.Contains(quick, task):
			return llmtest.Reply{Content: "done " + task, Block: release}
		default:
			return llmtest.Reply{Block: never}
		}
	})
	// Every slot busy when the signal comes, as in the old single case: a
	// free slot has a long poll out (jobs.Worker.fetchLoop), and a job
	// published into it while the worker stops is handed straight back,
	// one delivery spent (attempt 2 on the next worker).
	inFlight := append(slices.Clone(quick), stuck...)
	settings := []string{"NATS_URL=" + ns.ClientURL(), "OPENAI_BASE_URL=" + model.URL(),
		fmt.Sprintf("JETAGENT_CONCURRENCY=%d", len(inFlight)), fmt.Sprintf("JETAGENT_SHUTDOWN_GRACE=%s", grace)}
	first := startLoggedWorker(t, "first", processEnv(settings...))
	if _, err := first.waitLog(ctx, "worker ready"); err != nil {
		t.Fatal(err)
	}
	client, err := jobs.NewClient(ctx, nc, jobs.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
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
	for _, id := range quick {
		st, err := client.Wait(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != jobs.StatusSucceeded || st.Worker != "first" || st.Attempt != 1 || st.Result.Answer != "done "+id {
			t.Errorf("%s finished within the grace period as %+v", id, st)
		}
	}
	// With no stuck job, ctx (a minute) is far shorter than the grace: the
	// worker exits once its jobs are done.
	select {
	case <-first.done:
	case <-ctx.Done():
		t.Fatal("the worker did not exit after SIGTERM")
	}
	if first.err != nil {
		t.Errorf("worker exit after SIGTERM: %v", first.err)
	}
	if took := time.Since(signalled); len(stuck) > 0 && took < grace {
		t.Errorf("the worker exited %s after SIGTERM, before its %s grace period ended with jobs running", took, grace)
	}
	if over := strings.Contains(first.log(), "shutdown grace over"); over != (len(stuck) > 0) {
		t.Errorf("the grace period ran out: %v, want %v (stuck jobs %v)", over, len(stuck) > 0, stuck)
	}
	for _, id := range append(slices.Clone(stuck), "late") {
		st, err := client.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != jobs.StatusQueued {
			t.Errorf("%s after the worker stopped: %+v, want queued", id, st)
		}
		if id != "late" && !strings.Contains(st.Error, "worker first shut down") {
			t.Errorf("%s handed back without the reason: %q", id, st.Error)
		}
	}

	firstGone.Store(true)
	second := startLoggedWorker(t, "second", processEnv(settings...))
	for _, id := range append(slices.Clone(stuck), "late") {
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
		evs := readSettledJobEvents(t, ctx, nc, id)
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
		if slices.Contains(stuck, id) {
			wantRequeued = 1
		}
		if succeeded != 1 || requeued != wantRequeued {
			t.Errorf("%s: %d succeeded and %d requeued events, want 1 and %d:\n%s", id, succeeded, requeued, wantRequeued, eventTrail(evs))
		}
	}
	// The model was asked once per attempt: quick jobs were not run again.
	asked, want := map[string]int{}, map[string]int{"late": 1}
	for _, r := range model.Requests() {
		asked[r.Messages[len(r.Messages)-1].Content]++
	}
	for _, id := range quick {
		want[id] = 1
	}
	for _, id := range stuck {
		want[id] = 2
	}
	if fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Errorf("model requests per job %v, want %v", asked, want)
	}
	if err := second.stop(t, natstest.WaitTimeout); err != nil {
		t.Error(err)
	}
}
