//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// This binary plays two more parts than the worker (main_test.go's
// TestMain): a stock nats-server in its own process, on a fixed port and
// store so it can be SIGKILLed and started again on the same ones, and a
// counting MCP server over stdio whose one tool has a side effect. Both
// are chosen by the environment before TestMain runs.
const (
	// natsChildEnv is "<port> <store dir>".
	natsChildEnv = "JETAGENT_TEST_NATS_CHILD"
	// counterAddrEnv is where the counting MCP server reports each call
	// and waits for the go-ahead; counterLogEnv the file it appends each
	// call to; counterWhoEnv names its worker in both. Not JETAGENT_*: the
	// worker passes a stdio server only the variables its config names.
	counterAddrEnv = "COUNTER_MCP_ADDR"
	counterLogEnv  = "COUNTER_MCP_LOG"
	counterWhoEnv  = "COUNTER_MCP_WHO"
)

func init() {
	if v := os.Getenv(natsChildEnv); v != "" {
		runNATSChild(v)
	}
	if os.Getenv(counterAddrEnv) != "" {
		runCounterMCP()
	}
}

// runNATSChild serves JetStream on 127.0.0.1:<port> with its store in dir,
// with the server's defaults otherwise (1 MiB max_payload, ...), prints
// "ready" once it takes connections and runs until it is killed.
func runNATSChild(v string) {
	var port int
	var dir string
	if _, err := fmt.Sscanf(v, "%d %s", &port, &dir); err != nil {
		log.Fatalf("%s=%q: %v", natsChildEnv, v, err)
	}
	s, err := server.NewServer(&server.Options{JetStream: true, StoreDir: dir, Host: "127.0.0.1", Port: port})
	if err != nil {
		log.Fatal(err)
	}
	s.ConfigureLogger()
	s.Start()
	if !s.ReadyForConnections(natstest.WaitTimeout) {
		log.Fatal("nats-server not ready")
	}
	fmt.Println("ready")
	s.WaitForShutdown()
	os.Exit(0)
}

// runCounterMCP serves the tool record {step}: it appends "<who> <step>"
// to the log file, reports the call on the test's socket and returns once
// the test answers (or the call is cancelled). Not read-only and not
// idempotent, as a tool with a side effect.
func runCounterMCP() {
	addr, logFile, who := os.Getenv(counterAddrEnv), os.Getenv(counterLogEnv), os.Getenv(counterWhoEnv)
	s := mcpserver.NewMCPServer("counter", "1", mcpserver.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("record",
		mcp.WithDescription("Record one step of the task (a side effect)."),
		mcp.WithInteger("step", mcp.Required(), mcp.Min(1)),
		mcp.WithReadOnlyHintAnnotation(false),
		mcp.WithIdempotentHintAnnotation(false),
		mcp.WithDestructiveHintAnnotation(false),
	), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		step, err := req.RequireInt("step")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		line := fmt.Sprintf("%s %d\n", who, step)
		f, err := os.OpenFile(logFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, err
		}
		_, err = f.WriteString(line)
		if err == nil {
			err = f.Sync()
		}
		_ = f.Close()
		if err != nil {
			return nil, err
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		defer conn.Close() //nolint:errcheck
		stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
		defer stop()
		if _, err := io.WriteString(conn, line); err != nil {
			return nil, err
		}
		if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
			return nil, fmt.Errorf("record: no go-ahead: %w", err)
		}
		return mcp.NewToolResultText(fmt.Sprintf("recorded step %d", step)), nil
	})
	if err := mcpserver.NewStdioServer(s).Listen(context.Background(), os.Stdin, os.Stdout); err != nil &&
		!errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
	os.Exit(0)
}

// natsChild is a nats-server process (this binary, see runNATSChild).
type natsChild struct {
	cmd    *exec.Cmd
	stderr *lockedBuffer
	done   chan struct{}
}

// startNATSChild starts a nats-server on port with its store in dir and
// returns once it takes connections.
func startNATSChild(t *testing.T, port int, dir string) *natsChild {
	t.Helper()
	n := &natsChild{stderr: &lockedBuffer{}, done: make(chan struct{})}
	n.cmd = exec.Command(os.Args[0], "-test.run=^$")
	n.cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %s", natsChildEnv, port, dir))
	n.cmd.Stderr = n.stderr
	out, err := n.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = n.cmd.Wait(); close(n.done) }()
	t.Cleanup(func() {
		n.kill(t)
		if t.Failed() {
			t.Logf("nats-server on port %d:\n%s", port, n.stderr.String())
		}
	})
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("said %q", line)
		}
		ready <- err
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatalf("nats-server: %v\n%s", err, n.stderr.String())
		}
	case <-time.After(natstest.WaitTimeout):
		t.Fatalf("nats-server not ready\n%s", n.stderr.String())
	}
	return n
}

// kill SIGKILLs the server and waits until it is gone.
func (n *natsChild) kill(t *testing.T) {
	t.Helper()
	select {
	case <-n.done:
		return
	default:
	}
	if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	<-n.done
}

// counterCall is one record call as the counting MCP server reported it.
type counterCall struct {
	who  string
	step int
	conn net.Conn
}

// answer lets the call return.
func (c counterCall) answer() {
	_, _ = io.WriteString(c.conn, "ok\n")
	_ = c.conn.Close()
}

// counter receives the counting servers' calls: each is answered at once,
// except the first of step hold, which is handed to held.
type counter struct {
	ln   net.Listener
	hold int
	held chan counterCall

	mu    sync.Mutex
	calls []counterCall
}

func startCounter(t *testing.T, hold int) *counter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{ln: ln, hold: hold, held: make(chan counterCall, 1)}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { c.serve(conn) })
		}
	})
	return c
}

func (c *counter) serve(conn net.Conn) {
	line, err := bufio.NewReader(conn).ReadString('\n')
	var call counterCall
	if err == nil {
		_, err = fmt.Sscanf(line, "%s %d", &call.who, &call.step)
	}
	if err != nil {
		_ = conn.Close()
		return
	}
	call.conn = conn
	c.mu.Lock()
	first := call.step == c.hold && c.count(call.step) == 0
	c.calls = append(c.calls, call)
	c.mu.Unlock()
	if first {
		c.held <- call
		return
	}
	call.answer()
}

// count is how often step ran (c.mu held).
func (c *counter) count(step int) int {
	n := 0
	for _, call := range c.calls {
		if call.step == step {
			n++
		}
	}
	return n
}

// runs is how often each step ran and on which worker, in order.
func (c *counter) runs() (perStep map[int]int, trail []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	perStep = map[int]int{}
	for _, call := range c.calls {
		perStep[call.step]++
		trail = append(trail, fmt.Sprintf("%s:%d", call.who, call.step))
	}
	return perStep, trail
}

// threeSteps is the model: it records steps 1, 2 and 3, one a round, then
// answers. It counts the tool results it was shown, so a resumed attempt
// (or one started over) goes on from where its history stands.
func threeSteps(req llmtest.RecordedRequest) llmtest.Reply {
	done := 0
	for _, m := range req.Messages {
		if m.Role == llm.RoleTool {
			done++
		}
	}
	if done >= 3 {
		return llmtest.Reply{Content: "done"}
	}
	return llmtest.Reply{ToolCalls: []llm.ToolCall{{Function: llm.FunctionCall{
		Name: "record", Arguments: fmt.Sprintf(`{"step":%d}`, done+1)}}}}
}

// loggedWorker is a worker process (this binary as the worker command)
// whose log the test can wait on.
type loggedWorker struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // of Wait, once done is closed

	mu      sync.Mutex
	lines   []string
	newLine chan struct{} // closed and replaced on every line
}

func startLoggedWorker(t *testing.T, name string, env []string) *loggedWorker {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append([]string(nil), env...), "JETAGENT_WORKER_ID="+name)
	return startLogged(t, name, cmd)
}

// startLogged starts cmd, a worker process (through a wrapper such as
// nohup that execs it), as startLoggedWorker does.
func startLogged(t *testing.T, name string, cmd *exec.Cmd) *loggedWorker {
	t.Helper()
	w := &loggedWorker{name: name, cmd: cmd, done: make(chan struct{}), newLine: make(chan struct{})}
	stderr, err := w.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			w.mu.Lock()
			w.lines = append(w.lines, sc.Text())
			close(w.newLine)
			w.newLine = make(chan struct{})
			w.mu.Unlock()
		}
	}()
	go func() {
		<-read // Wait closes the pipe: read it to the end first
		w.err = w.cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		select {
		case <-w.done:
		default:
			_ = w.cmd.Process.Kill() // its MCP servers get the parent-death signal
			<-w.done
		}
		if log := w.log(); t.Failed() || strings.Contains(log, "WARNING: DATA RACE") {
			if strings.Contains(log, "WARNING: DATA RACE") {
				t.Errorf("worker %s reported a data race", name)
			}
			t.Logf("worker %s log:\n%s", name, log)
		}
	})
	return w
}

func (w *loggedWorker) log() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n")
}

// waitLog waits until a line of the worker's log contains every one of
// substrs, and returns it.
func (w *loggedWorker) waitLog(ctx context.Context, substrs ...string) (string, error) {
	seen := 0
	for {
		w.mu.Lock()
		lines, ch := w.lines, w.newLine
		w.mu.Unlock()
		for ; seen < len(lines); seen++ {
			match := true
			for _, s := range substrs {
				match = match && strings.Contains(lines[seen], s)
			}
			if match {
				return lines[seen], nil
			}
		}
		select {
		case <-ch:
		case <-w.done:
			return "", fmt.Errorf("worker %s exited (%w) before logging %q", w.name, w.err, substrs)
		case <-ctx.Done():
			return "", fmt.Errorf("worker %s did not log %q: %w", w.name, substrs, ctx.Err())
		}
	}
}

// stop SIGTERMs the worker and waits for its exit, at most d.
func (w *loggedWorker) stop(t *testing.T, d time.Duration) error {
	t.Helper()
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-w.done:
		return w.err
	case <-time.After(d):
		return fmt.Errorf("worker %s still running %s after SIGTERM", w.name, d)
	}
}

// processEnv is a worker process's environment: this process's without
// any jetagent, NATS or OpenAI setting, then the given ones.
func processEnv(settings ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JETAGENT_") && !strings.HasPrefix(kv, "NATS_") && !strings.HasPrefix(kv, "OPENAI_") {
			env = append(env, kv)
		}
	}
	return append(append(env, workerChildEnv+"=1", "OPENAI_API_KEY=", "JETAGENT_LOG_LEVEL=debug"), settings...)
}

// counterConfig writes the MCP servers file of worker who: the counting
// server, reporting to c and logging to logFile.
func counterConfig(t *testing.T, c *counter, logFile, who string) string {
	t.Helper()
	cfg := map[string]any{"mcpServers": map[string]any{"counter": map[string]any{
		"command": os.Args[0], "args": []string{"-test.run=^$"},
		"env": map[string]string{counterAddrEnv: c.ln.Addr().String(), counterLogEnv: logFile, counterWhoEnv: who},
	}}}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), who+".mcp.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNATSRestartMidJob: a stock nats-server (its own process) is
// SIGKILLed while a job of three side-effecting tool calls is in its
// second call, and started again on the same store and port. Two worker
// processes serve the queue. The job succeeds; no event of an attempt
// follows one of a later attempt (one attempt at a time); every event
// matches its schema; every step ran. How often each call ran is
// checked: none runs twice (the call journal).
//
//   - default ack wait (30 s): the server comes back at once; the attempt
//     must ride out the outage (or hand the job over cleanly).
//   - ack wait 6 s: the server stays down until the running attempt has
//     fenced itself (no heartbeat confirmed for nearly the ack wait), then
//     comes back; another attempt must take the job over and finish it.
func TestNATSRestartMidJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		ackWait string // "" keeps the default
	}{
		{"default ack wait", ""},
		{"ack wait 6s", "6s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testNATSRestart(t, tc.ackWait)
		})
	}
}

func testNATSRestart(t *testing.T, ackWait string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*natstest.WaitTimeout)
	defer cancel()
	const id = "nats-restart"
	port, store := natstest.FreePort(t), filepath.Join(t.TempDir(), "nats")
	ns := startNATSChild(t, port, store)
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	reconnected := make(chan struct{}, 1)
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.ReconnectHandler(func(*nats.Conn) {
			select {
			case reconnected <- struct{}{}:
			default:
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)

	model := llmtest.NewServer(t)
	model.Handle(threeSteps)
	calls := startCounter(t, 2)
	logFile := filepath.Join(t.TempDir(), "calls.log")
	settings := []string{"NATS_URL=" + url, "OPENAI_BASE_URL=" + model.URL(), "JETAGENT_TOOL_MODE=full", "JETAGENT_SHUTDOWN_GRACE=5s"}
	if ackWait != "" {
		settings = append(settings, "JETAGENT_ACK_WAIT="+ackWait)
	}

	// Both workers take jobs before the job is submitted (one still
	// setting up when NATS goes away would stop with that error).
	workers := map[string]*loggedWorker{}
	for _, name := range []string{"first", "second"} {
		w := startLoggedWorker(t, name, processEnv(append(settings, "JETAGENT_MCP_CONFIG="+counterConfig(t, calls, logFile, name))...))
		if _, err := w.waitLog(ctx, "worker ready"); err != nil {
			t.Fatal(err)
		}
		workers[name] = w
	}
	client, err := jobs.NewClient(ctx, nc, jobs.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Submit(ctx, &jobs.Job{ID: id, Task: "record three steps", Servers: []string{"counter"}}); err != nil {
		t.Fatal(err)
	}

	// Step 2 is in flight: kill the server, let the call return into the
	// outage, and bring the server back.
	var held counterCall
	select {
	case held = <-calls.held:
	case <-ctx.Done():
		t.Fatal("step 2 was never called")
	}
	ns.kill(t)
	held.answer()
	if ackWait != "" {
		line, err := workers[held.who].waitLog(ctx, "attempt fenced", id)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("while NATS was down: %s", line)
	}
	startNATSChild(t, port, store)
	select {
	case <-reconnected:
	case <-ctx.Done():
		t.Fatal("the test's connection did not come back")
	}

	var st *jobs.State
	for st == nil {
		st, err = client.Wait(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("the job did not end: %v", err)
			}
			t.Logf("wait: %v; again", err)
			st = nil
		}
	}
	if st.Status != jobs.StatusSucceeded || st.Result == nil || st.Result.Answer != "done" {
		t.Errorf("state %+v, result %+v", st, st.Result)
	}
	if ackWait != "" && st.Attempt < 2 {
		t.Errorf("attempt %d finished the job; the fenced attempt 1 cannot have", st.Attempt)
	}

	b, err := client.Transcript(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	var tr jobs.Transcript
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatal(err)
	}
	checkCoherent(t, "transcript", tr.Messages)

	evs := readSettledJobEvents(t, ctx, nc, id)
	checkEventSchemas(t, evs)
	gaps := checkOneAttemptAtATime(t, evs)
	if n := len(evs); n == 0 || evs[n-1].Type != jobs.EventSucceeded {
		t.Errorf("the last event is not %s:\n%s", jobs.EventSucceeded, eventTrail(evs))
	}
	// Events published during the outage wait and go out in order once
	// NATS is back (#9 point 4): no gap.
	for _, g := range gaps {
		t.Errorf("event gap: %s", g)
	}

	perStep, trail := calls.runs()
	logged, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(logged), "\n"); got != len(trail) {
		t.Errorf("the call log has %d lines, the test saw %d calls", got, len(trail))
	}
	callsRepeated := 0
	for step := 1; step <= 3; step++ {
		if perStep[step] == 0 {
			t.Errorf("step %d never ran (calls %v)", step, trail)
		}
		callsRepeated += max(perStep[step]-1, 0)
	}
	t.Logf("attempt %d on %s finished; calls %v; completed calls repeated: %d; events:\n%s",
		st.Attempt, st.Worker, trail, callsRepeated, eventTrail(evs))
	// The call journal: completed calls never run again, and step 2, in
	// flight at the kill, is not resent either (record is neither
	// read-only nor idempotent).
	if callsRepeated != 0 {
		t.Errorf("%d completed calls ran again: %v", callsRepeated, trail)
	}

	for name, w := range workers {
		if err := w.stop(t, 15*time.Second); err != nil {
			t.Errorf("worker %s: %v", name, err)
		}
	}
}
