//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// retryLine is what the worker logs while NATS_URL does not answer.
const retryLine = "not reachable; retrying"

// TestWorkerWaitsForNATS: a worker process started before its NATS server
// (nothing listens on NATS_URL's port) does not exit: it logs that it
// retries, /healthz answers and /readyz says what it waits for. Once a
// JetStream server starts on that port, the worker connects, creates the
// topology and runs a job; SIGTERM then stops it with exit status 0.
func TestWorkerWaitsForNATS(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*natstest.WaitTimeout)
	defer cancel()
	model := llmtest.NewServer(t)
	model.Handle(func(req llmtest.RecordedRequest) llmtest.Reply {
		return llmtest.Reply{Content: "done: " + req.Messages[len(req.Messages)-1].Content}
	})
	port := natstest.FreePort(t)
	w := startLoggedWorker(t, "waiter", processEnv(fmt.Sprintf("NATS_URL=nats://127.0.0.1:%d", port),
		"OPENAI_BASE_URL="+model.URL(), "JETAGENT_METRICS_ADDR=127.0.0.1:0"))
	line, err := w.waitLog(ctx, retryLine)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("NATS at nats://127.0.0.1:%d %s", port, retryLine); !strings.Contains(line, want) ||
		!strings.Contains(line, "no servers available for connection") {
		t.Errorf("retry line %q, want %q with the error", line, want)
	}
	metricsLine, err := w.waitLog(ctx, "metrics on")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`url=(http://[^ ]+)/metrics`).FindStringSubmatch(metricsLine)
	if m == nil {
		t.Fatalf("no address in %q", metricsLine)
	}
	base := m[1]
	if code, body := get(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz while waiting for NATS: %d %s", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "waiting for the NATS server") {
		t.Errorf("/readyz while waiting for NATS: %d %q", code, body)
	}

	o := natstest.Options(t.TempDir())
	o.Port = port
	nc := natstest.Connect(t, natstest.StartWith(t, o))
	if _, err := w.waitLog(ctx, "worker ready"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.waitLog(ctx, "NATS reachable", "failed_attempts="); err != nil {
		t.Error(err)
	}
	client, err := jobs.NewClient(ctx, nc, jobs.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Submit(ctx, &jobs.Job{ID: "after-the-wait", Task: "hello"}); err != nil {
		t.Fatal(err)
	}
	st, err := client.Wait(ctx, "after-the-wait")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != jobs.StatusSucceeded || st.Result.Answer != "done: hello" || st.Worker != "waiter" {
		t.Errorf("job: %+v", st)
	}
	waitFor(t, "/readyz to say ready", func() bool {
		code, _ := get(t, base+"/readyz")
		return code == 200
	})
	// Not a flood: the first failure at once, then one line per 10 s.
	if n := strings.Count(w.log(), retryLine); n > 3 {
		t.Errorf("%d retry lines:\n%s", n, w.log())
	}
	if err := w.stop(t, 15*time.Second); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
}

// TestSIGTERMWhileWaitingForNATS: SIGTERM stops a worker that waits for
// NATS at once, with the exit status of any shutdown (0).
func TestSIGTERMWhileWaitingForNATS(t *testing.T) {
	t.Parallel()
	ctx := natstest.Context(t)
	model := llmtest.NewServer(t)
	w := startLoggedWorker(t, "stopped", processEnv(fmt.Sprintf("NATS_URL=nats://127.0.0.1:%d", natstest.FreePort(t)),
		"OPENAI_BASE_URL="+model.URL()))
	if _, err := w.waitLog(ctx, retryLine); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// A worker that ignored the signal would retry for ever: ctx is the
	// bound. There was also a 5 s bound on the exit, dropped: a bet on the
	// machine's speed that caught nothing, as the signal comes right after
	// the first failure, while the waits between attempts are under a
	// second, so a wait that did not end with the signal (it does: the
	// backoff has ctx) would still have exited within it.
	select {
	case <-w.done:
	case <-ctx.Done():
		t.Fatalf("still running %s after SIGTERM:\n%s", time.Since(signalled), w.log())
	}
	if w.err != nil {
		t.Errorf("exit after SIGTERM while waiting: %v", w.err)
	}
	if !strings.Contains(w.log(), "stopped while waiting for NATS") {
		t.Errorf("log:\n%s", w.log())
	}
}

// TestNATSErrorsRetryingCannotFix: credentials the server refuses and a
// server without JetStream end the worker at once (exit status 1) with a
// clear error, no retry; so does JETAGENT_NATS_CONNECT_TIMEOUT running out.
func TestNATSErrorsRetryingCannotFix(t *testing.T) {
	t.Parallel()
	auth := natstest.Options(t.TempDir())
	auth.Username, auth.Password = "agent", "s3cret"
	authURL := natstest.StartWith(t, auth).ClientURL()
	noJS := natstest.Options(t.TempDir())
	noJS.JetStream = false
	noJSURL := natstest.StartWith(t, noJS).ClientURL()
	tests := []struct {
		name     string
		env      []string
		want     []string
		retrying bool
	}{
		{"wrong password", []string{"NATS_URL=" + authURL, "NATS_USER=agent", "NATS_PASSWORD=guess"},
			[]string{"worker: connect to NATS at " + authURL, "Authorization Violation", "check NATS_USER/NATS_PASSWORD"}, false},
		{"no credentials", []string{"NATS_URL=" + authURL},
			[]string{"Authorization Violation", "the server refused the credentials"}, false},
		{"no JetStream", []string{"NATS_URL=" + noJSURL},
			[]string{"worker: JetStream topology:", "no responders", "is JetStream enabled on the NATS server?"}, false},
		{"connect timeout", []string{fmt.Sprintf("NATS_URL=nats://127.0.0.1:%d", natstest.FreePort(t)), "JETAGENT_NATS_CONNECT_TIMEOUT=2s"},
			[]string{"not reachable within JETAGENT_NATS_CONNECT_TIMEOUT=2s", "last attempt: nats: no servers available"}, true},
	}
	model := llmtest.NewServer(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := natstest.Context(t)
			w := startLoggedWorker(t, "refused", processEnv(append(tt.env, "OPENAI_BASE_URL="+model.URL())...))
			select {
			case <-w.done:
			case <-ctx.Done():
				t.Fatalf("the worker kept running:\n%s", w.log())
			}
			var exit *exec.ExitError
			if !errors.As(w.err, &exit) || exit.ExitCode() != 1 {
				t.Errorf("exit: %v, want status 1", w.err)
			}
			log := w.log()
			for _, s := range tt.want {
				if !strings.Contains(log, s) {
					t.Errorf("log lacks %q:\n%s", s, log)
				}
			}
			if got := strings.Contains(log, retryLine); got != tt.retrying {
				t.Errorf("retried: %v, want %v:\n%s", got, tt.retrying, log)
			}
			lines := strings.Split(strings.TrimSpace(log), "\n")
			t.Logf("exit 1: %s", lines[len(lines)-1])
		})
	}
}
