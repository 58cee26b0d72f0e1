//go:build linux

package main

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// TestSIGHUPStopsGracefully: a worker on the embedded default got SIGHUP
// (its terminal closed, or an operator used to nats-server's `kill -HUP`
// reload) and died at once with status 129, without a log line: its job
// in flight waited out the ack wait, and a write in flight would have
// been reported interrupted. It now stops as on SIGTERM: the job running
// finishes on it and it exits 0. A worker started under nohup (SIGHUP
// ignored) still ignores it.
func TestSIGHUPStopsGracefully(t *testing.T) {
	t.Parallel()
	t.Run("graceful", func(t *testing.T) {
		t.Parallel()
		if signal.Ignored(syscall.SIGHUP) {
			// go test itself under nohup: the worker would inherit the
			// ignored SIGHUP and rightly keep ignoring it. A caught
			// signal is reset to the default in a child, an ignored one
			// is not; the channel absorbs this process's own.
			signal.Notify(make(chan os.Signal, 1), syscall.SIGHUP)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*natstest.WaitTimeout)
		defer cancel()
		release := make(chan struct{})
		model := llmtest.NewServer(t)
		model.Handle(func(llmtest.RecordedRequest) llmtest.Reply { return llmtest.Reply{Content: "done", Block: release} })
		w := startLoggedWorker(t, "hup", embeddedEnv(t, model))
		client := embeddedClient(ctx, t, w)
		if _, err := client.Submit(ctx, &jobs.Job{ID: "in-flight", Task: "wait"}); err != nil {
			t.Fatal(err)
		}
		if err := model.WaitRequests(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := w.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if _, err := w.waitLog(ctx, "shutting down", "hangup"); err != nil {
			t.Fatal(err)
		}
		close(release)
		if _, err := w.waitLog(ctx, "job finished", "job=in-flight", "attempt=1", "status=succeeded"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w.done:
		case <-ctx.Done():
			t.Fatal("the worker did not exit after SIGHUP")
		}
		if w.err != nil {
			t.Errorf("worker exit after SIGHUP: %v", w.err)
		}
	})
	t.Run("ignored under nohup", func(t *testing.T) {
		t.Parallel()
		nohup, err := exec.LookPath("nohup")
		if err != nil {
			t.Skip("no nohup:", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*natstest.WaitTimeout)
		defer cancel()
		model := llmtest.NewServer(t)
		model.Handle(func(llmtest.RecordedRequest) llmtest.Reply { return llmtest.Reply{Content: "done"} })
		cmd := exec.Command(nohup, os.Args[0], "-test.run=^$") // nohup execs it: the same process
		cmd.Env = append(embeddedEnv(t, model), "JETAGENT_WORKER_ID=nohup")
		cmd.Dir = t.TempDir() // where nohup would put nohup.out
		w := startLogged(t, "nohup", cmd)
		client := embeddedClient(ctx, t, w)
		if err := w.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		// Still serving: a job submitted after the hangup runs.
		if _, err := client.Submit(ctx, &jobs.Job{ID: "after-hup", Task: "go"}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.waitLog(ctx, "job finished", "job=after-hup", "status=succeeded"); err != nil {
			t.Fatal(err)
		}
		if err := w.stop(t, natstest.WaitTimeout); err != nil {
			t.Fatal(err)
		}
		if log := w.log(); strings.Contains(log, "hangup") || !strings.Contains(log, "terminated") {
			t.Errorf("the shutdown should be SIGTERM's alone:\n%s", log)
		}
	})
}

// embeddedEnv is a worker process's environment on the zero-setup
// default: NATS_URL unset, an embedded server on a free port with its
// store in a directory of the test's, the scripted model.
func embeddedEnv(t *testing.T, model *llmtest.Server) []string {
	t.Helper()
	return processEnv("OPENAI_BASE_URL="+model.URL(), "JETAGENT_DATA_DIR="+filepath.Join(t.TempDir(), "data"),
		"JETAGENT_LISTEN=127.0.0.1:0")
}

var embeddedURL = regexp.MustCompile(`msg="embedded NATS started" url=(nats://\S+)`)

// embeddedClient connects to the embedded NATS server of w, once it takes
// jobs, and returns a jobs client on it.
func embeddedClient(ctx context.Context, t *testing.T, w *loggedWorker) *jobs.Client {
	t.Helper()
	line, err := w.waitLog(ctx, "embedded NATS started")
	if err != nil {
		t.Fatal(err)
	}
	m := embeddedURL.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no URL in %q", line)
	}
	if _, err := w.waitLog(ctx, "worker ready"); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(m[1], nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	client, err := jobs.NewClient(ctx, nc, jobs.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return client
}
