package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/jobs/jobstest"
)

// childArgsEnv makes the test binary run submit with these arguments
// (a JSON array): a submit process a test can SIGKILL.
const childArgsEnv = "SUBMIT_TEST_CHILD_ARGS"

// twoCallRunner calls the client tool shout twice for each job it has a
// plan for: once at once (the plan's first gets its outcome), and once
// the plan's release is closed; each call's outcome is also a tool.result
// event, as the agent loop emits it. The answer is both outcomes.
type twoCallRunner struct {
	nc    *nats.Conn
	plans sync.Map // job id -> *callPlan
}

type callPlan struct {
	timeout time.Duration // of the second call
	first   chan string
	release chan struct{}
}

// plan is the plan for job id, made before the job is submitted.
func (r *twoCallRunner) plan(id string, timeout time.Duration) *callPlan {
	p := &callPlan{timeout: timeout, first: make(chan string, 1), release: make(chan struct{})}
	r.plans.Store(id, p)
	return p
}

func (r *twoCallRunner) Run(ctx context.Context, job *jobs.Job, env jobs.RunEnv) (*jobs.Outcome, error) {
	v, ok := r.plans.Load(job.ID)
	if !ok {
		return nil, fmt.Errorf("no plan for job %s", job.ID)
	}
	p := v.(*callPlan)
	call := func(text string, timeout time.Duration) string {
		c, err := clienttools.NewCaller(r.nc, job.ID, job.ClientSecret, clienttools.Options{Timeout: timeout})
		if err != nil {
			return "call failed: " + err.Error()
		}
		out, err := c.CallText(ctx, "shout", []byte(`{"text":"`+text+`"}`))
		data := map[string]any{"call_id": text, "name": "shout", "tool": "shout", "output": out, "error": err != nil}
		if err != nil {
			out = "call failed: " + err.Error()
			data["output"] = "Error: " + err.Error()
		}
		_ = env.Emit(ctx, "tool.result", 1, data)
		return out
	}
	one := call("one", 30*time.Second)
	p.first <- one
	select {
	case <-p.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	two := call("two", p.timeout)
	return &jobs.Outcome{Result: agentloop.Result{Answer: one + " " + two, Rounds: 2, StopReason: "final_answer"}}, nil
}

// submitChild runs submit args in a child process until the worker's
// first client tool call was answered, and returns a kill that SIGKILLs it
// (a crash, a closed terminal) and waits until the NATS server dropped
// its subscription to the job's client tool requests: the job goes on
// without it; or, for a child left to follow the job to its end, exited,
// which waits for it to exit 0 and returns what it wrote.
func submitChild(t *testing.T, nc *nats.Conn, p *callPlan, id string, args ...string) (kill func(), exited func() string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^$")
	b, err := json.Marshal(append([]string{"--id", id}, args...))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), childArgsEnv+"="+string(b))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-p.first:
		if got != "ONE" {
			t.Fatalf("the first call gave %q, want ONE", got)
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("the first call was not answered\n%s", out.String())
	}
	exited = func() string {
		t.Helper()
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait() }()
		select {
		case err := <-waited:
			if err != nil {
				t.Errorf("submit: %v\n%s", err, out.String())
			}
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			if err := <-waited; err != nil {
				t.Logf("submit killed: %v", err)
			}
			t.Errorf("submit did not exit once its job ended\n%s", out.String())
		}
		return out.String()
	}
	kill = func() {
		t.Helper()
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		var ee *exec.ExitError
		if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != -1 {
			t.Fatalf("submit was not killed (%v)\n%s", err, out.String())
		}
		// Until the server sees the connection closed, a request still
		// goes to the dead process (and waits out its timeout).
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := nc.Request(clienttools.Subject("agent", id), nil, 200*time.Millisecond)
			if errors.Is(err, nats.ErrNoResponders) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the killed submit's subscription stays: %v", err)
			}
		}
	}
	return kill, exited
}

// TestLocalMCPReattach: a submit --local-mcp killed while its job ran
// left the job's client tools unanswered for good: the secret they are
// signed with was that process's own, and no command could answer them
// again (a new submit --local-mcp --id ID was refused the job's secret),
// so each later call failed after the worker's client tool timeout.
// submit watch --local-mcp FILE ID now answers them again with the job's
// secret, read from the job's message; a plain watch says what to do
// when a call finds nobody listening.
func TestLocalMCPReattach(t *testing.T) {
	nc, _ := startWorker(t) // its echoRunner serves "default"; these jobs go to "reattach"
	r := &twoCallRunner{nc: nc}
	jobstest.RunWorker(t, jobs.Config{Conn: nc, Runner: r, WorkerID: "cli-reattach", Topology: jobs.TopologyConfig{Queues: []string{"reattach"}},
		Concurrency: 1, MaxJobBytes: 4096, FetchWait: 200 * time.Millisecond, ShutdownGrace: time.Second})
	cfg := localMCPConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := jobs.NewClient(ctx, nc, jobs.ClientConfig{MaxJobBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("attached again", func(t *testing.T) {
		p := r.plan("reattach-1", 30*time.Second)
		kill, _ := submitChild(t, nc, p, "reattach-1", "--queue", "reattach", "--local-mcp", cfg, "shout")
		st, err := cl.Status(ctx, "reattach-1")
		if err != nil {
			t.Fatal(err)
		}
		job, err := (&cli{ctx: ctx, nc: nc}).queuedJob(cl, st)
		if err != nil || len(job.ClientSecret) < 32 {
			t.Fatalf("the job's message: %v", err)
		}
		kill()
		close(p.release) // the second call finds nobody, and is asked again until watch answers
		var stdout, stderr strings.Builder
		code := run(ctx, []string{"watch", "--local-mcp", cfg, "reattach-1"}, strings.NewReader(""), &stdout, &stderr)
		if code != 0 || stdout.String() != "ONE TWO\n" {
			t.Errorf("exit %d, answer %q, want ONE TWO\n%s", code, stdout.String(), stderr.String())
		}
		if s := stderr.String(); !strings.Contains(s, "answering the client tools of job reattach-1 from "+cfg+" again") ||
			strings.Contains(s, "warning") {
			t.Errorf("stderr:\n%s", s)
		}
		// The secret went nowhere it is shown.
		events := submitCmd(t, "", "watch", "--json", "reattach-1")
		for what, text := range map[string]string{"watch": stdout.String() + stderr.String(), "the events": events.stdout + events.stderr} {
			if strings.Contains(text, job.ClientSecret) {
				t.Errorf("%s show the job's secret", what)
			}
		}
	})

	t.Run("the first still running", func(t *testing.T) {
		p := r.plan("reattach-2", 30*time.Second)
		// Not killed: it follows the job to its end, as the watch does.
		_, exited := submitChild(t, nc, p, "reattach-2", "--queue", "reattach", "--local-mcp", cfg, "shout")
		stderr := &signalWriter{want: "answering the client tools of job reattach-2", seen: make(chan struct{})}
		done := make(chan int, 1)
		var stdout strings.Builder
		go func() {
			done <- run(ctx, []string{"watch", "--local-mcp", cfg, "reattach-2"}, strings.NewReader(""), &stdout, stderr)
		}()
		select {
		case <-stderr.seen:
		case code := <-done:
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		close(p.release)
		if code := <-done; code != 0 || stdout.String() != "ONE TWO\n" ||
			!strings.Contains(stderr.String(), "warning: something already listens on agent.client.reattach-2") {
			t.Errorf("exit %d, answer %q\n%s", code, stdout.String(), stderr)
		}
		if out := exited(); !strings.Contains(out, "ONE TWO\n") {
			t.Errorf("the first submit:\n%s", out)
		}
	})

	t.Run("not attached", func(t *testing.T) {
		p := r.plan("reattach-3", time.Second)
		kill, _ := submitChild(t, nc, p, "reattach-3", "--queue", "reattach", "--local-mcp", cfg, "shout")
		kill()
		close(p.release)
		var stdout, stderr strings.Builder
		code := run(ctx, []string{"watch", "reattach-3"}, strings.NewReader(""), &stdout, &stderr)
		if code != 0 || !strings.Contains(stdout.String(), "no submitter listening on agent.client.reattach-3") {
			t.Errorf("exit %d, answer %q", code, stdout.String())
		}
		if s := stderr.String(); !strings.Contains(s, "nothing answers the client tools of job reattach-3") ||
			!strings.Contains(s, "submit watch --local-mcp FILE reattach-3 answers them again") {
			t.Errorf("stderr:\n%s", s)
		}
	})

	t.Run("refused", func(t *testing.T) {
		if res := submitCmd(t, "", "--id", "reattach-none", "echo:x"); res.code != 0 {
			t.Fatalf("%+v", res)
		}
		if res := submitCmd(t, "", "--detach", "--id", "reattach-block", "block"); res.code != 0 {
			t.Fatalf("%+v", res)
		}
		defer submitCmd(t, "", "cancel", "reattach-block")
		for _, tc := range []struct {
			args []string
			code int
			want string
		}{
			// An ended job has nothing left to answer: it is followed.
			{[]string{"watch", "--local-mcp", cfg, "reattach-none"}, 0, "job reattach-none"},
			{[]string{"watch", "--local-mcp", cfg, "--wait", "reattach-none"}, exitUsage, "drop --wait"},
			{[]string{"watch", "--local-mcp", cfg, "reattach-nope"}, exitFailed, "no such job"},
			{[]string{"watch", "--local-mcp", cfg, "reattach-block"}, exitUsage, "job reattach-block declares no client tools"},
		} {
			if res := submitCmd(t, "", tc.args...); res.code != tc.code || !strings.Contains(res.stderr, tc.want) {
				t.Errorf("%v: %+v", tc.args, res)
			}
		}
	})
}
