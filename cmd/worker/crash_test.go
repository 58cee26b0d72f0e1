//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sys/unix"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/childtest"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// TestCrashResumesFromCheckpoint is the durability promise end to end: a
// worker process (this binary re-run as the worker command, configured by
// the environment like the real one) is SIGKILLed while round 2 of a job
// waits for the model; a second worker process takes the redelivered job
// and resumes from the journal of round 1. The model is not asked round 1
// again, the tool is not called again, the job succeeds on attempt 2 with a
// coherent transcript, and no MCP server process outlives its worker.
func TestCrashResumesFromCheckpoint(t *testing.T) {
	t.Parallel()
	needMCPServer(t)
	ctx := natstest.Context(t)
	const id = "crash-resume"

	ns, nc := startCrashNATS(t)

	// Round 1 calls add; round 2 is held until the worker dies. Later
	// requests get scriptedModel's answers, as a real model would: a
	// resumed history gets the final answer, a fresh start calls add again.
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	model := llmtest.NewServer(t,
		llmtest.Reply{ToolCalls: []llm.ToolCall{{Function: llm.FunctionCall{Name: "add", Arguments: `{"a":2,"b":3}`}}}},
		llmtest.Reply{Block: hold},
	)
	model.Handle(scriptedModel)
	env := crashWorkerEnv(t, ns.ClientURL(), model.URL())

	first, client := startFirstWorker(ctx, t, nc, "first", env)
	if _, err := client.Submit(ctx, &jobs.Job{ID: id, Task: "add 2 3", Servers: []string{"demo"}}); err != nil {
		t.Fatal(err)
	}

	// Round 2's request reaches the model only after round 1's answer and
	// its call's result are in the journal (each stored before the loop
	// goes on).
	if err := model.WaitRequests(ctx, 2); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	progress, err := js.KeyValue(ctx, "AGENT_JOURNAL")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := progress.Get(ctx, id+".j.t1"); err != nil {
		t.Fatalf("no journaled round-1 answer while round 2 waits: %v", err)
	}
	ent, err := progress.Get(ctx, id+".j.c1.0")
	if err != nil {
		t.Fatalf("no journaled call while round 2 waits: %v", err)
	}
	var done struct {
		Kind   string `json:"kind"`
		Name   string `json:"name"`
		Result struct {
			Text string `json:"text"`
		} `json:"result"`
	}
	if err := json.Unmarshal(ent.Value(), &done); err != nil {
		t.Fatal(err)
	}
	if done.Kind != "done" || done.Name != "add" || done.Result.Text != "5" {
		t.Fatalf("journaled call: %s", ent.Value())
	}
	if st, err := client.Status(ctx, id); err != nil || st.Status != jobs.StatusRunning || st.Attempt != 1 || st.Worker != "first" {
		t.Fatalf("before the kill: state %+v, %v", st, err)
	}

	first.kill(t)
	first.checkChildrenExit(t)

	second := startChildWorker(t, "second", env)
	st, err := client.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != jobs.StatusSucceeded {
		t.Fatalf("state %+v, result %+v", st, st.Result)
	}
	if st.Attempt != 2 || st.Worker != "second" || st.Result.Answer != "The result is 5" || st.Result.Rounds != 1 {
		t.Errorf("attempt %d, worker %q, answer %q, rounds %d; want 2, second, The result is 5, 1",
			st.Attempt, st.Worker, st.Result.Answer, st.Result.Rounds)
	}

	// The model: asked round 1 once; attempt 2's only request is exactly
	// the request the first worker was killed in (same history, same tools).
	reqs := model.Requests()
	if len(reqs) != 3 {
		for _, r := range reqs {
			t.Logf("request %d: %+v", r.N, r.Messages)
		}
		t.Fatalf("model got %d requests, want 3", len(reqs))
	}
	if !reflect.DeepEqual(reqs[2].Messages, reqs[1].Messages) {
		t.Errorf("resumed request differs from the interrupted one:\n got %+v\nwant %+v", reqs[2].Messages, reqs[1].Messages)
	}
	if string(reqs[2].ToolsJSON) != string(reqs[0].ToolsJSON) {
		t.Errorf("resumed request has another tools array:\n%s\nwant\n%s", reqs[2].ToolsJSON, reqs[0].ToolsJSON)
	}
	want := []llm.Message{
		{Role: llm.RoleUser, Content: "add 2 3"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_1_0", Type: "function", Function: llm.FunctionCall{Name: "add", Arguments: `{"a":2,"b":3}`}}}},
		{Role: llm.RoleTool, ToolCallID: "call_1_0", Content: "5"},
	}
	if !reflect.DeepEqual(reqs[2].Messages, want) {
		t.Errorf("resumed request messages:\n got %+v\nwant %+v", reqs[2].Messages, want)
	}
	// Usage carries over through the journal: the answered requests 1
	// and 3 (llmtest bills about 4 bytes per prompt token), not the one
	// that died with the first worker.
	estimate := func(r llmtest.RecordedRequest) int64 { return int64(len(r.Raw)+3) / 4 }
	if got, want := st.Result.Usage.PromptTokens, estimate(reqs[0])+estimate(reqs[2]); got != want {
		t.Errorf("prompt tokens %d, want %d (requests 1 and 3)", got, want)
	}

	// The events: the tool ran once, in attempt 1; attempt 2 starts at round 2.
	var trail []string
	calls := map[int]int{}
	if _, err := client.Watch(ctx, id, func(ev jobs.Event) {
		trail = append(trail, fmt.Sprintf("%s@%d/r%d/%s", ev.Type, ev.Attempt, ev.Round, ev.Worker))
		switch ev.Type {
		case agentloop.EventToolCall, agentloop.EventToolResult:
			calls[ev.Attempt]++
		case agentloop.EventLLMRequest:
			if ev.Attempt == 2 && ev.Round != 2 {
				t.Errorf("attempt 2 asked the model round %d", ev.Round)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(trail, " ")
	for _, want := range []string{
		"llm.request@1/r2/first", "started@2/r0/second", "llm.request@2/r2/second", "succeeded@2/r0/second",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("events lack %s:\n%s", want, joined)
		}
	}
	if calls[1] != 2 || calls[2] != 0 {
		t.Errorf("tool.call+tool.result events per attempt %v, want 2 in attempt 1 and none in 2:\n%s", calls, joined)
	}

	// The stored transcripts tell one coherent story: the request's, with
	// the tool's name on its result, and the answer.
	story := append([]llm.Message(nil), want...)
	story[2].Name = "add"
	story = append(story, llm.Message{Role: llm.RoleAssistant, Content: "The result is 5"})
	for _, raw := range []bool{false, true} {
		b, err := client.Transcript(ctx, id, raw)
		if err != nil {
			t.Fatal(err)
		}
		var tr jobs.Transcript
		if err := json.Unmarshal(b, &tr); err != nil {
			t.Fatal(err)
		}
		label := fmt.Sprintf("transcript raw=%v", raw)
		if tr.Attempt != 2 || tr.Worker != "second" || tr.Rounds != 1 {
			t.Errorf("%s: attempt %d, worker %q, rounds %d", label, tr.Attempt, tr.Worker, tr.Rounds)
		}
		checkCoherent(t, label, tr.Messages)
		if !reflect.DeepEqual(tr.Messages, story) {
			t.Errorf("%s: messages %+v", label, tr.Messages)
		}
	}
	// A finished job leaves no checkpoint or journal to resume from.
	if left := journalKeys(ctx, t, progress, id); len(left) > 0 {
		t.Errorf("journal keys after success: %v", left)
	}

	// A graceful stop closes the MCP servers too.
	second.stop(t)
	second.checkChildrenExit(t)
}

// checkCoherent fails unless every tool message answers a call of the
// assistant message it follows, each call once, with nothing in between,
// and the task and every call id appear once.
func checkCoherent(t *testing.T, label string, msgs []llm.Message) {
	t.Helper()
	open := map[string]bool{} // calls awaiting their result
	seen := map[string]bool{}
	users := 0
	for i, m := range msgs {
		if m.Role != llm.RoleTool && len(open) > 0 {
			t.Errorf("%s: message %d (%s) before the results of %v", label, i, m.Role, open)
		}
		switch m.Role {
		case llm.RoleUser:
			users++
		case llm.RoleAssistant:
			for _, c := range m.ToolCalls {
				if seen[c.ID] {
					t.Errorf("%s: message %d repeats call %s", label, i, c.ID)
				}
				seen[c.ID], open[c.ID] = true, true
			}
		case llm.RoleTool:
			if !open[m.ToolCallID] {
				t.Errorf("%s: message %d answers %q, not an open call", label, i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		}
	}
	if len(open) > 0 {
		t.Errorf("%s: calls without results: %v", label, open)
	}
	if users != 1 {
		t.Errorf("%s: %d user messages, want the task once", label, users)
	}
}

// crashWorkerEnv is the environment of a worker process: this process's,
// without any jetagent, NATS or OpenAI setting, plus the test's.
func crashWorkerEnv(t *testing.T, natsURL, modelURL string) []string {
	t.Helper()
	bin, err := buildMCPServer()
	if err != nil {
		t.Fatal(err)
	}
	// The server runs behind a shell that outlives it: a server that does
	// not exit when its stdin closes. Only the kernel's parent-death signal
	// (toolcache's Pdeathsig) stops it when its worker is SIGKILLed.
	mcpCfg := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(mcpCfg, []byte(`{"mcpServers": {"demo": {"command": "sh", "args": ["-c", "`+bin+`; exec sleep 60"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JETAGENT_") && !strings.HasPrefix(kv, "NATS_") && !strings.HasPrefix(kv, "OPENAI_") {
			env = append(env, kv)
		}
	}
	return append(env,
		workerChildEnv+"=1",
		"NATS_URL="+natsURL,
		"OPENAI_BASE_URL="+modelURL,
		"OPENAI_API_KEY=",
		"JETAGENT_MCP_CONFIG="+mcpCfg,
		"JETAGENT_TOOL_MODE=full",
		// A dead worker's job is back within two seconds; a live one
		// heartbeats far more often, so a busy machine does not look dead.
		"JETAGENT_ACK_WAIT=2s",
		"JETAGENT_HEARTBEAT=250ms",
		"JETAGENT_SHUTDOWN_GRACE=5s",
		"JETAGENT_LOG_LEVEL=debug",
	)
}

// childWorker is a worker process: this test binary run as the worker command.
type childWorker struct {
	name   string
	cmd    *exec.Cmd
	stderr strings.Builder // read only after Wait
	exited bool
	// children are the worker's child processes (its MCP servers), each
	// with a pidfd opened while it ran, so a reused pid cannot fool us.
	children map[int]int // pid -> pidfd
}

func startChildWorker(t *testing.T, name string, env []string) *childWorker {
	t.Helper()
	c := &childWorker{name: name, children: map[int]int{}}
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(env, "JETAGENT_WORKER_ID="+name)
	c.cmd.Stderr = &c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !c.exited {
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("worker %s stderr:\n%s", name, c.stderr.String())
		}
		for pid, fd := range c.children {
			if !childtest.Exited(fd, 0) {
				// Left behind by the worker: kill its process group (the
				// pool gives each server its own) so the test leaves none.
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
			_ = unix.Close(fd)
		}
	})
	return c
}

// recordChildren notes the worker's current child processes.
func (c *childWorker) recordChildren(t *testing.T) {
	t.Helper()
	for _, pid := range childtest.Children(t, c.cmd.Process.Pid) {
		if _, ok := c.children[pid]; ok {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // it has exited meanwhile
		}
		c.children[pid] = fd
	}
}

// kill SIGKILLs the worker: no shutdown code of its runs.
func (c *childWorker) kill(t *testing.T) {
	t.Helper()
	c.recordChildren(t)
	if len(c.children) == 0 {
		t.Fatalf("worker %s has no MCP server process", c.name)
	}
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
	c.exited = true
	c.checkNoRace(t)
}

// stop SIGTERMs the worker and expects a clean exit.
func (c *childWorker) stop(t *testing.T) {
	t.Helper()
	c.recordChildren(t)
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := c.cmd.Wait()
	c.exited = true
	if err != nil {
		t.Errorf("worker %s after SIGTERM: %v", c.name, err)
	}
	c.checkNoRace(t)
}

func (c *childWorker) checkNoRace(t *testing.T) {
	t.Helper()
	if strings.Contains(c.stderr.String(), "WARNING: DATA RACE") {
		t.Errorf("worker %s reported a data race", c.name)
	}
}

// checkChildrenExit fails for each child process of the (gone) worker
// that is still running a few seconds later: an MCP server orphaned by
// its worker's death.
func (c *childWorker) checkChildrenExit(t *testing.T) {
	t.Helper()
	for pid, fd := range c.children {
		if !childtest.Exited(fd, 10*time.Second) {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			t.Errorf("worker %s is gone but its child %d (%s) still runs, parent now %d",
				c.name, pid, strings.ReplaceAll(string(cmdline), "\x00", " "), childtest.ParentPID(pid))
		}
	}
}

// startCrashNATS starts the embedded nats-server of a test whose workers
// are processes, and a connection to it.
func startCrashNATS(t *testing.T) (*server.Server, *nats.Conn) {
	t.Helper()
	ns, err := jobs.StartEmbedded(jobs.EmbeddedConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return ns, nc
}

// startFirstWorker starts the worker process that creates the topology
// and returns it with a client, once the topology is complete: the
// dead-letterer's consumer is its last piece, so that consumer's creation
// advisory means a client can open it.
func startFirstWorker(ctx context.Context, t *testing.T, nc *nats.Conn, name string, env []string) (*childWorker, *jobs.Client) {
	t.Helper()
	created, err := nc.SubscribeSync(server.JSAdvisoryConsumerCreatedPre + ".AGENT_ADVISORIES.>")
	if err != nil {
		t.Fatal(err)
	}
	defer created.Unsubscribe() //nolint:errcheck
	w := startChildWorker(t, name, env)
	if _, err := created.NextMsgWithContext(ctx); err != nil {
		t.Fatalf("worker %s did not create the topology: %v", name, err)
	}
	client, err := jobs.NewClient(ctx, nc, jobs.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return w, client
}
