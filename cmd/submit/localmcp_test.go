package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/jobs/jobstest"
)

// localMCPEnv makes the test binary a stdio MCP server with one tool,
// shout, for --local-mcp.
const localMCPEnv = "SUBMIT_TEST_LOCAL_MCP"

func serveLocalMCPForTests() {
	srv := mcpserver.NewMCPServer("local", "1", mcpserver.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("shout", mcp.WithDescription("Upper-cases text"), mcp.WithString("text")),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(strings.ToUpper(req.GetString("text", ""))), nil
		})
	if err := mcpserver.ServeStdio(srv); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// localMCPConfig is a --local-mcp file whose one server is this test
// binary (shout).
func localMCPConfig(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "local-mcp.json")
	cfg := fmt.Sprintf(`{"mcpServers": {"local": {"command": %q, "env": {%q: "1"}}}}`, exe, localMCPEnv)
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// clientRunner calls the client tool shout of each job, once release is
// closed, and answers what the call gave (its text, or its error's).
type clientRunner struct {
	nc      *nats.Conn
	release chan struct{}
}

func (r *clientRunner) Run(ctx context.Context, job *jobs.Job, _ jobs.RunEnv) (*jobs.Outcome, error) {
	select {
	case <-r.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c, err := clienttools.NewCaller(r.nc, job.ID, job.ClientSecret, clienttools.Options{Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	answer, err := c.CallText(ctx, "shout", []byte(`{"text":"hi"}`))
	if err != nil {
		answer = "call failed: " + err.Error()
	}
	return &jobs.Outcome{Result: agentloop.Result{Answer: answer, Rounds: 1, StopReason: "final_answer"}}, nil
}

// signalWriter closes seen once what was written contains want.
type signalWriter struct {
	mu   sync.Mutex
	buf  strings.Builder
	want string
	seen chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return len(p), nil
}

func (w *signalWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestLocalMCPResubmitted: submit --id ID --local-mcp run again for a job
// that is still going on (the first submit was killed; the natural way to
// "resume") followed it while serving its local tools under a new secret:
// the worker signs with the first submit's, so every request was rejected
// unseen and every call waited out its timeout as "the submitter did not
// answer", with no word why. Now the second submit says it cannot answer
// that job's client tools and does not listen, so the worker's error says
// nobody is listening.
func TestLocalMCPResubmitted(t *testing.T) {
	nc, _ := startWorker(t) // its echoRunner serves "default"; this job goes to "local"
	r := &clientRunner{nc: nc, release: make(chan struct{})}
	jobstest.RunWorker(t, jobs.Config{Conn: nc, Runner: r, WorkerID: "cli-local", Topology: jobs.TopologyConfig{Queues: []string{"local"}}, Concurrency: 1,
		MaxJobBytes: 4096, FetchWait: 200 * time.Millisecond, ShutdownGrace: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := jobs.NewClient(ctx, nc, jobs.ClientConfig{MaxJobBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	// The first submit's job: its secret went with it.
	first := &jobs.Job{ID: "local-again", Task: "shout", Queue: "local", ClientSecret: strings.Repeat("s", 43),
		ClientTools: []clienttools.Decl{{Name: "shout", InputSchema: []byte(`{"type":"object"}`)}}}
	if _, err := cl.Submit(ctx, first); err != nil {
		t.Fatal(err)
	}

	stderr := &signalWriter{want: "cannot answer its client tools", seen: make(chan struct{})}
	var stdout strings.Builder
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--id", "local-again", "--queue", "local", "--local-mcp", localMCPConfig(t), "shout"},
			strings.NewReader(""), &stdout, stderr)
	}()
	select {
	case <-stderr.seen:
	case code := <-done:
		t.Fatalf("exit %d without the warning\n%s", code, stderr)
	case <-ctx.Done():
		t.Fatalf("no warning\n%s", stderr)
	}
	close(r.release) // the worker calls shout now
	var code int
	select {
	case code = <-done:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if code != 0 || !strings.Contains(stdout.String(), "no submitter listening on agent.client.local-again") {
		t.Errorf("exit %d, answer %q, want the call to say nobody listens\n%s", code, stdout.String(), stderr)
	}
}

// TestLocalMCPWithJobClientTools: a --job file with client_tools (and the
// client_secret the schema then requires) beside --local-mcp had its secret
// replaced, so the file's own tools went to the local servers ("unknown
// tool") and the service holding the file's secret could not answer them.
// The combination is refused before anything is started.
func TestLocalMCPWithJobClientTools(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct{ name, job string }{
		{"client tools", `{"task":"t","client_secret":"` + strings.Repeat("s", 43) +
			`","client_tools":[{"name":"mytool","input_schema":{"type":"object"}}]}`},
		{"a secret", `{"task":"t","client_secret":"` + strings.Repeat("s", 43) + `"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".json")
			if err := os.WriteFile(p, []byte(tt.job), 0o600); err != nil {
				t.Fatal(err)
			}
			res := runQuiet("--job", p, "--local-mcp", filepath.Join(dir, "never-read.json"))
			if res.code != exitUsage || !strings.Contains(res.stderr, "has client_tools or a client_secret of its own") {
				t.Errorf("%+v", res)
			}
		})
	}
}

// TestLocalMCPInterrupted: Ctrl-C while following a --local-mcp job said
// only "job X goes on (submit watch X)", but nothing answers its client
// tools after that: the message now says so, and how to stop the job.
func TestLocalMCPInterrupted(t *testing.T) {
	startWorker(t)
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	stderr := &signalWriter{want: "blocking", seen: make(chan struct{})}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--id", "local-int", "--local-mcp", localMCPConfig(t), "block"},
			strings.NewReader(""), io.Discard, stderr)
	}()
	select {
	case <-stderr.seen:
	case code := <-done:
		t.Fatalf("exit %d before the job ran\n%s", code, stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("the job did not start\n%s", stderr)
	}
	interrupt()
	select {
	case code := <-done:
		if code != exitFailed || !strings.Contains(stderr.String(), "its client tools (--local-mcp) are answered no more") ||
			!strings.Contains(stderr.String(), "submit cancel local-int") {
			t.Errorf("exit %d\n%s", code, stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("submit did not return after the interrupt")
	}
	if c := submitCmd(t, "", "cancel", "local-int"); c.code != 0 {
		t.Errorf("cancel %+v", c)
	}
}

// TestLocalMCPWithoutTools: --local-mcp with a file whose servers are all
// disabled, or that names none, queued the job with a client secret and
// no client tools, without a word: the model did without the tools asked
// for (as with a server that failed to start, which is refused). Refused
// now, before anything is queued.
func TestLocalMCPWithoutTools(t *testing.T) {
	startWorker(t)
	dir := t.TempDir()
	for _, tc := range []struct{ name, cfg string }{
		{"every server disabled", `{"mcpServers": {"x": {"command": "true", "disabled": true}}}`},
		{"no server", `{"mcpServers": {}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			if err := os.WriteFile(p, []byte(tc.cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			id := "no-tools-" + strings.ReplaceAll(tc.name, " ", "-")
			res := submitCmd(t, "", "--id", id, "--local-mcp", p, "echo:hi")
			if res.code != exitFailed || !strings.Contains(res.stderr, "--local-mcp "+p+" offers no tools") {
				t.Errorf("%+v", res)
			}
			if st := submitCmd(t, "", "status", id); st.code != exitFailed {
				t.Errorf("the job was queued: %+v", st)
			}
		})
	}
}
