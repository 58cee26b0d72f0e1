package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/jobs/jobstest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// notifyBuffer is a stderr that can be waited on for any text.
type notifyBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func newNotifyBuffer() *notifyBuffer { return &notifyBuffer{changed: make(chan struct{})} }

func (b *notifyBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	close(b.changed)
	b.changed = make(chan struct{})
	return n, err
}

func (b *notifyBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until text has been written, failing the test after 30 s.
func (b *notifyBuffer) waitFor(t *testing.T, text string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		b.mu.Lock()
		has, changed := strings.Contains(b.buf.String(), text), b.changed
		b.mu.Unlock()
		if has {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("no %q in stderr after 30 s; stderr:\n%s", text, b.String())
		}
	}
}

// TestWatchSaysWhenNATSGoesAway: a watch whose NATS server stops says that
// the connection is lost and that it is back (it said nothing, then only
// "nats: consumer not active"), and still follows the job to its end.
func TestWatchSaysWhenNATSGoesAway(t *testing.T) {
	dir, port := t.TempDir(), natstest.FreePort(t)
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	restart := func() { // on the first server's port and store
		t.Helper()
		s, err := jobs.StartEmbedded(jobs.EmbeddedConfig{DataDir: dir, Listen: listen})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	}
	s, err := jobs.StartEmbedded(jobs.EmbeddedConfig{DataDir: dir, Listen: listen})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	r := &echoRunner{runs: map[string]int{}}
	jobstest.RunWorker(t, jobs.Config{Conn: nc, Runner: r, WorkerID: "outage-test", Concurrency: 2,
		FetchWait: 200 * time.Millisecond, ShutdownGrace: time.Second})
	t.Setenv("NATS_URL", s.ClientURL())

	if res := submitCmd(t, "", "--detach", "--id", "outage-1", "block"); res.code != 0 {
		t.Fatalf("submit: %+v", res)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := newNotifyBuffer()
	done := runAsync(ctx, stderr, "watch", "outage-1")
	stderr.waitFor(t, "blocking") // the watch has the job's events

	s.Shutdown()
	s.WaitForShutdown()
	stderr.waitFor(t, "submit: NATS connection lost")
	if !strings.Contains(stderr.String(), "reconnecting") {
		t.Errorf("the lost connection does not say submit reconnects:\n%s", stderr)
	}
	restart()
	stderr.waitFor(t, "submit: NATS connection restored after ")

	if res := submitCmd(t, "", "cancel", "outage-1"); res.code != 0 {
		t.Fatalf("cancel: %+v", res)
	}
	select {
	case res := <-done:
		if res.code != 1 || !strings.Contains(res.stderr, "job outage-1 cancelled") {
			t.Errorf("watch after the outage: %+v", res)
		}
		if strings.Count(res.stderr, "connection lost") != 1 || strings.Count(res.stderr, "restored") != 1 {
			t.Errorf("the outage is said once each way:\n%s", res.stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("watch did not end after the cancel; stderr:\n%s", stderr)
	}
}

// TestNoStateSaysWhy: status and cancel of an id with no state say what
// that means (a hand-published job has none until a worker takes it, and
// only its message can be removed before then), not just "job not found".
func TestNoStateSaysWhy(t *testing.T) {
	startWorker(t)
	res := submitCmd(t, "", "status", "nostate-1")
	if res.code != 1 || !strings.Contains(res.stderr, "job not found: nostate-1 has no state") ||
		!strings.Contains(res.stderr, "submit watch --wait nostate-1") {
		t.Errorf("status: %+v", res)
	}
	res = submitCmd(t, "", "cancel", "nostate-1")
	if res.code != 1 || !strings.Contains(res.stderr, "job not found: nostate-1 has no state, so nothing to cancel") ||
		!strings.Contains(res.stderr, "nats stream rmm AGENT_JOBS SEQ") {
		t.Errorf("cancel: %+v", res)
	}
}

// TestWatchAfterTheEventsAreGone: watching a job whose events have expired
// (JETAGENT_EVENTS_MAX_AGE) says so; it printed the answer under "job ID"
// and nothing else, as if the job had had no events.
func TestWatchAfterTheEventsAreGone(t *testing.T) {
	nc, _ := startWorker(t)
	if res := submitCmd(t, "", "--id", "expired-1", "echo:hi"); res.code != 0 {
		t.Fatalf("%+v", res)
	}
	res := submitCmd(t, "", "watch", "expired-1")
	if res.code != 0 || strings.Contains(res.stderr, "no events") {
		t.Errorf("watch with the events there: %+v", res)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := natstest.Context(t)
	events, err := js.Stream(ctx, "AGENT_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	if err := events.Purge(ctx, jetstream.WithPurgeSubject("agent.events.expired-1.>")); err != nil {
		t.Fatal(err)
	}
	res = submitCmd(t, "", "watch", "expired-1")
	if res.code != 0 || strings.TrimSpace(res.stdout) != "hi" ||
		!strings.Contains(res.stderr, "no events of job expired-1 are left") {
		t.Errorf("watch with the events gone: %+v", res)
	}
	if res := submitCmd(t, "", "watch", "--json", "expired-1"); strings.Contains(res.stderr, "no events") {
		t.Errorf("--json: %+v", res)
	}
}

// TestAuthorizationViolationSaysWhich: a server refusing submit's
// connection is answered with what submit presented (nothing, or which
// variables), not "nats: Authorization Violation" alone; never a secret.
func TestAuthorizationViolationSaysWhich(t *testing.T) {
	s, err := jobs.StartEmbedded(jobs.EmbeddedConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0", User: "u", Password: "right-password"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	t.Setenv("NATS_URL", s.ClientURL())
	t.Setenv("NATS_USER", "")
	t.Setenv("NATS_PASSWORD", "")
	res := submitCmd(t, "", "status", "auth-1")
	if res.code != 1 || !strings.Contains(res.stderr, "Authorization Violation") ||
		!strings.Contains(res.stderr, "the server wants credentials and none are set") {
		t.Errorf("no credentials: %+v", res)
	}
	t.Setenv("NATS_USER", "u")
	t.Setenv("NATS_PASSWORD", "wrong-password")
	res = submitCmd(t, "", "status", "auth-1")
	if res.code != 1 || !strings.Contains(res.stderr, "the server refused the credentials of NATS_USER, NATS_PASSWORD") ||
		strings.Contains(res.stderr, "wrong-password") {
		t.Errorf("wrong password: %+v", res)
	}
	t.Setenv("NATS_PASSWORD", "right-password")
	if res := submitCmd(t, "", "status", "auth-1"); strings.Contains(res.stderr, "Authorization") {
		t.Errorf("right password: %+v", res)
	}
}

// TestJobFileOfSeveralJobs: a batch file given to --job is refused with the
// pointer to --file, not only as "invalid character after top-level value";
// a file of one job with trailing white space is still one job.
func TestJobFileOfSeveralJobs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	two := filepath.Join(dir, "two.jsonl")
	if err := os.WriteFile(two, []byte("{\"task\":\"a\"}\n{\"task\":\"b\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := submitCmd(t, "", "--job", two)
	if res.code != 1 || !strings.Contains(res.stderr, "goes on after its first JSON object") ||
		!strings.Contains(res.stderr, "--file "+two) {
		t.Errorf("%+v", res)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("{\"task\":\"a\"} x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if res := submitCmd(t, "", "--job", bad); res.code != 1 || !strings.Contains(res.stderr, "goes on after its first JSON object") {
		t.Errorf("%+v", res)
	}
	if got := severalValues([]byte("{\"task\":\"a\"}\r\n\n"), "one.json"); got != "" {
		t.Errorf("one job with trailing white space: %q", got)
	}
}

// TestCommandAfterAFlag: "submit --json status ID" (a command's flag put
// before it) queued the task "status ID" for a model; it is refused with
// the command line meant, and such a task can still be given quoted or
// after --.
func TestCommandAfterAFlag(t *testing.T) {
	startWorker(t)
	for _, args := range [][]string{
		{"--json", "status", "cmdflag-1"},
		{"--detach", "cancel", "cmdflag-1"},
		{"--json", "watch", "cmdflag-1"},
		{"--id", "cmdflag-2", "transcript", "cmdflag-1"},
	} {
		name := args[len(args)-2]
		res := submitCmd(t, "", args...)
		if res.code != 2 || !strings.Contains(res.stderr, "after a flag is the start of a task") ||
			!strings.Contains(res.stderr, "submit "+name+" [flags] cmdflag-1") {
			t.Errorf("%v: %+v", args, res)
		}
	}
	if res := submitCmd(t, "", "status", "--json", "cmdflag-2"); !strings.Contains(res.stderr, "has no state") {
		t.Errorf("a refused line queued a job: %+v", res)
	}
	for _, tc := range []struct {
		args []string
		task string
	}{
		{[]string{"--id", "cmdflag-3", "--", "status", "x1"}, "status x1"},
		{[]string{"--id", "cmdflag-4", "status x2"}, "status x2"},
	} {
		if res := submitCmd(t, "", tc.args...); res.code != 0 {
			t.Errorf("%v: %+v", tc.args, res)
			continue
		}
		var st jobs.State
		res := submitCmd(t, "", "status", "--json", tc.args[1])
		if err := json.Unmarshal([]byte(res.stdout), &st); err != nil || st.Task != tc.task {
			t.Errorf("%v: want task %q, got %+v", tc.args, tc.task, res)
		}
	}
}

// TestCancelInterrupted: Ctrl-C while cancel waits for a job whose worker
// is gone said only "context canceled"; it says the cancel stands.
func TestCancelInterrupted(t *testing.T) {
	nc, _ := startWorker(t)
	ctx := natstest.Context(t)
	kv := stateBucket(t, nc)
	// Running on a worker that is gone: nothing answers the cancel request.
	st := `{"id":"gone-worker-1","queue":"default","status":"running","attempt":1,"worker":"gone","task":"x"}`
	if _, err := kv.Put(ctx, "gone-worker-1", []byte(st)); err != nil {
		t.Fatal(err)
	}
	w, err := kv.Watch(ctx, "gone-worker-1", jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Stop() }()
	runCtx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	stderr := newNotifyBuffer()
	done := runAsync(runCtx, stderr, "cancel", "gone-worker-1")
	for recorded := false; !recorded; {
		select {
		case e := <-w.Updates():
			recorded = e != nil && strings.Contains(string(e.Value()), `"cancel_requested":true`)
		case <-time.After(30 * time.Second):
			t.Fatal("the cancel was not recorded in the state")
		}
	}
	interrupt()
	select {
	case res := <-done:
		if res.code != 1 || !strings.Contains(res.stderr, "stopped waiting; job gone-worker-1 is running and its cancel stands") ||
			strings.Contains(res.stderr, "context canceled") {
			t.Errorf("%+v", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("cancel did not stop")
	}
}

// TestMistypedIDSuggested: status, watch, transcript and cancel of an id
// with no state name the ids it is likely a typo of.
func TestMistypedIDSuggested(t *testing.T) {
	startWorker(t)
	if res := submitCmd(t, "", "--id", "report-2026-12-03", "echo:hi"); res.code != 0 {
		t.Fatalf("submit: %+v", res)
	}
	for _, cmd := range []string{"status", "watch", "transcript", "cancel"} {
		res := submitCmd(t, "", cmd, "report-2026-12-30")
		if res.code != 1 || !strings.Contains(res.stderr, "did you mean report-2026-12-03?") {
			t.Errorf("%s: %+v", cmd, res)
		}
	}
	if res := submitCmd(t, "", "status", "zzz-other"); !strings.Contains(res.stderr, "check the id") {
		t.Errorf("status of an id like none: %+v", res)
	}
}
