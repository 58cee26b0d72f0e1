package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// watchedLog is a log a test waits on: each write wakes the waiters.
type watchedLog struct {
	mu    sync.Mutex
	b     strings.Builder
	wrote chan struct{} // closed and replaced at each write
}

func newWatchedLog() *watchedLog { return &watchedLog{wrote: make(chan struct{})} }

func (l *watchedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	close(l.wrote)
	l.wrote = make(chan struct{})
	return len(p), nil
}

// waitFor waits until the log holds want, or ctx ends.
func (l *watchedLog) waitFor(ctx context.Context, t *testing.T, want string) {
	t.Helper()
	for {
		l.mu.Lock()
		out, wrote := l.b.String(), l.wrote
		l.mu.Unlock()
		if strings.Contains(out, want) {
			return
		}
		select {
		case <-wrote:
		case <-ctx.Done():
			t.Fatalf("no %q in the log:\n%s", want, out)
		}
	}
}

func (l *watchedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A worker whose NATS server goes away and comes back on the same port
// logs the loss (with the error) and the return (with the URL, its token
// redacted), once each, and its connection's close at shutdown. It said
// nothing of either before: only "heartbeat failed: nats: connection
// closed", which read as permanent.
func TestWorkerLogsNATSDisconnectAndReconnect(t *testing.T) {
	t.Parallel()
	opts := natstest.Options(t.TempDir())
	opts.Port = natstest.FreePort(t)
	opts.Authorization = "nats-s3cret" // given as the URL's user part
	ns := natstest.StartWith(t, opts)
	model := llmtest.NewServer(t)
	model.Handle(scriptedModel)

	// Settings without the environment, so the test may run in parallel.
	s := defaultSettings()
	s.NATS.URL = fmt.Sprintf("nats://nats-s3cret@127.0.0.1:%d", opts.Port)
	s.OpenAI.BaseURL, s.OpenAI.APIKey = model.URL(), ""
	s.WorkerID = "reconnecting"
	if err := s.validate(); err != nil {
		t.Fatal(err)
	}
	logs := newWatchedLog()
	ctx, cancel := context.WithCancel(natstest.Context(t))
	defer cancel()
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, s, slog.New(slog.NewTextHandler(logs, nil)), func(*jobs.Worker, *nats.Conn) { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("worker stopped: %v", err)
	case <-ctx.Done():
		t.Fatal("worker not ready")
	}

	ns.Shutdown()
	ns.WaitForShutdown()
	logs.waitFor(ctx, t, "NATS connection lost")
	restarted, err := server.NewServer(opts) // the same port and store
	if err != nil {
		t.Fatal(err)
	}
	restarted.Start()
	t.Cleanup(func() { restarted.Shutdown(); restarted.WaitForShutdown() })
	if !restarted.ReadyForConnections(natstest.WaitTimeout) {
		t.Fatal("restarted server not ready")
	}
	logs.waitFor(ctx, t, "NATS connection restored")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("worker: %v", err)
	}

	out := logs.String()
	url := fmt.Sprintf("url=nats://xxxxx@127.0.0.1:%d", opts.Port)
	for _, tc := range []struct {
		msg  string
		want []string // in the line
	}{
		{`level=WARN msg="NATS connection lost; reconnecting`, []string{url, "err="}},
		{`level=INFO msg="NATS connection restored"`, []string{url, "down_for="}},
		{`level=INFO msg="NATS connection closed"`, nil},
	} {
		if n := strings.Count(out, tc.msg); n != 1 {
			t.Errorf("%q logged %d times, want once:\n%s", tc.msg, n, out)
			continue
		}
		line := out[strings.Index(out, tc.msg):]
		line, _, _ = strings.Cut(line, "\n")
		for _, w := range tc.want {
			if !strings.Contains(line, w) {
				t.Errorf("%q lacks %q", line, w)
			}
		}
	}
	lost, restored, closed := strings.Index(out, "NATS connection lost"), strings.Index(out, "NATS connection restored"),
		strings.Index(out, "NATS connection closed")
	if lost >= restored || restored >= closed {
		t.Errorf("not lost, restored, closed in that order:\n%s", out)
	}
	if strings.Contains(out, "nats-s3cret") {
		t.Errorf("the log holds the URL's token:\n%s", out)
	}
}

// TestNATSAsyncErrorsLogged: what the server reports asynchronously (here
// a publish its permissions refuse) reaches the worker's log, once per
// minute for one message, instead of nats.go's bare lines on stderr.
func TestNATSAsyncErrorsLogged(t *testing.T) {
	t.Parallel()
	opts := natstest.Options(t.TempDir())
	opts.Users = []*server.User{{Username: "w", Password: "pw", Permissions: &server.Permissions{
		Publish: &server.SubjectPermission{Deny: []string{"forbidden.>"}},
	}}}
	ns := natstest.StartWith(t, opts)
	nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo("w", "pw"))
	if err != nil {
		t.Fatal(err)
	}
	logs := newWatchedLog()
	closeNATS := logNATSEvents(nc, slog.New(slog.NewTextHandler(logs, nil)))
	defer closeNATS()
	ctx := natstest.Context(t)
	for range 3 {
		if err := nc.Publish("forbidden.x", nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	logs.waitFor(ctx, t, `msg="NATS server reported an error"`)
	// A round trip after the refusals: the server sent all three before
	// this flush's pong, and nats.go hands them to the handler in order.
	if err := nc.FlushWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	closeNATS()
	out := logs.String()
	if n := strings.Count(out, "NATS server reported an error"); n != 1 || !strings.Contains(strings.ToLower(out), "permissions violation") {
		t.Errorf("want the refusal logged once, naming it:\n%s", out)
	}
}
