//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/journal"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// counterEnv makes this test binary a counting MCP stdio server: each
// call appends "<tool> <arg> <idempotency key>" to the file it names.
// A call whose arg starts with "hang" blocks once it is written down
// (until the process dies), unless the file <counter>.released exists.
//
// With counterHoldEnv set, each call is then held 0–400 ms (by its name
// and arg's hash) before it answers, as real work would: a fault in that
// time finds the call in flight, its effect done (the soak uses it).
const (
	counterEnv     = "JETAGENT_TEST_COUNTER"
	counterHoldEnv = "JETAGENT_TEST_COUNTER_HOLD"
)

func init() {
	if f := os.Getenv(counterEnv); f != "" {
		os.Exit(runCounterServer(f, os.Getenv(counterHoldEnv) != ""))
	}
}

func runCounterServer(file string, hold bool) int {
	s := mcpserver.NewMCPServer("counter", "1.0.0", mcpserver.WithToolCapabilities(false))
	schema := json.RawMessage(`{"type":"object","properties":{"arg":{"type":"string"}},"required":["arg"]}`)
	handler := func(name string) mcpserver.ToolHandlerFunc {
		return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			arg := req.GetString("arg", "")
			key := ""
			if m := req.Params.Meta; m != nil {
				key, _ = m.AdditionalFields[journal.MetaKey].(string)
			}
			f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(f, "%s %s %s\n", name, arg, key)
			_ = f.Sync()
			_ = f.Close()
			if hold {
				h := fnv.New32a()
				_, _ = h.Write([]byte(name + " " + arg))
				select {
				case <-time.After(time.Duration(h.Sum32()%400) * time.Millisecond): // the call's own work
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			if strings.HasPrefix(arg, "hang") {
				if _, err := os.Stat(file + ".released"); err != nil {
					<-ctx.Done() // until the worker (and so this server) dies
					return nil, ctx.Err()
				}
			}
			return mcp.NewToolResultText(name + " " + arg + " ok"), nil
		}
	}
	write := mcp.NewToolWithRawSchema("write", "Write (a side effect).", schema)
	put := mcp.NewToolWithRawSchema("put", "Put (idempotent).", schema)
	put.Annotations.IdempotentHint = mcp.ToBoolPtr(true)
	read := mcp.NewToolWithRawSchema("read", "Read.", schema)
	read.Annotations.ReadOnlyHint = mcp.ToBoolPtr(true)
	s.AddTool(write, handler("write"))
	s.AddTool(put, handler("put"))
	s.AddTool(read, handler("read"))
	if err := mcpserver.ServeStdio(s); err != nil {
		return 1
	}
	return 0
}

// countCalls reads the counter file: tool+arg -> runs, and the keys seen.
func countCalls(t *testing.T, file string) (map[string]int, []string) {
	t.Helper()
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return map[string]int{}, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runs := map[string]int{}
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Fields(sc.Text())
		if len(parts) < 2 {
			continue
		}
		runs[parts[0]+" "+parts[1]]++
		if len(parts) > 2 {
			keys = append(keys, parts[2])
		}
	}
	return runs, keys
}

// TestKilledDuringAToolCall is the call journal end to end, with real
// processes: a worker is SIGKILLed while the second round's call runs
// (after round 1's two calls completed); another worker takes the job
// over. The model is not asked round 2 again, no completed call runs
// again, and the call in flight follows the annotation rule: a plain
// write is reported to the model as interrupted (tool.interrupted), an
// idempotent put is sent again. Every call carries the same idempotency
// key in every attempt.
func TestKilledDuringAToolCall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tool        string
		interrupted bool
	}{
		{"write", true},
		{"put", false},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			t.Parallel()
			killedDuringACall(t, tc.tool, tc.interrupted)
		})
	}
}

func killedDuringACall(t *testing.T, hangTool string, wantInterrupted bool) {
	needMCPServer(t)
	ctx := natstest.Context(t)
	id := "killed-in-" + hangTool
	ns, nc := startCrashNATS(t)

	// The model answers by the history it is shown, as a real one would.
	model := llmtest.NewServer(t)
	model.Handle(func(req llmtest.RecordedRequest) llmtest.Reply {
		tools := 0
		for _, m := range req.Messages {
			if m.Role == llm.RoleTool {
				tools++
			}
		}
		switch tools {
		case 0:
			return llmtest.Reply{ToolCalls: []llm.ToolCall{
				{Function: llm.FunctionCall{Name: "write", Arguments: `{"arg":"a"}`}},
				{Function: llm.FunctionCall{Name: "read", Arguments: `{"arg":"r"}`}},
			}}
		case 2:
			return llmtest.Reply{ToolCalls: []llm.ToolCall{{Function: llm.FunctionCall{Name: hangTool, Arguments: `{"arg":"hang"}`}}}}
		}
		return llmtest.Reply{Content: "done"}
	})

	counter := filepath.Join(t.TempDir(), "calls")
	mcpCfg := filepath.Join(t.TempDir(), "mcp.json")
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"counter": map[string]any{
		"command": os.Args[0], "args": []string{"-test.run=^$"}, "env": map[string]string{counterEnv: counter},
	}}})
	if err := os.WriteFile(mcpCfg, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(crashWorkerEnv(t, ns.ClientURL(), model.URL()), "JETAGENT_MCP_CONFIG="+mcpCfg)

	first, client := startFirstWorker(ctx, t, nc, "first", env)
	if _, err := client.Submit(ctx, &jobs.Job{ID: id, Task: "do it"}); err != nil {
		t.Fatal(err)
	}

	// Wait until the hanging call has reached the server: the tool.call
	// event of round 2, then the counter file's line.
	sub, err := nc.SubscribeSync("agent.events." + id + ".tool.call")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe() //nolint:errcheck
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			t.Fatalf("no round-2 tool.call: %v", err)
		}
		var ev jobs.Event
		if json.Unmarshal(m.Data, &ev) == nil && ev.Round == 2 {
			break
		}
	}
	for {
		if runs, _ := countCalls(t, counter); runs[hangTool+" hang"] == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the hanging call never reached the server")
		case <-time.After(20 * time.Millisecond): // a file written by another process: nothing to wait on
		}
	}
	first.kill(t)
	first.checkChildrenExit(t)
	// From now on the hanging tool returns at once when it is sent again.
	if err := os.WriteFile(counter+".released", nil, 0o600); err != nil {
		t.Fatal(err)
	}

	second := startChildWorker(t, "second", env)
	defer second.stop(t)
	st, err := client.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != jobs.StatusSucceeded || st.Attempt != 2 || st.Result.Answer != "done" {
		t.Fatalf("state %+v", st)
	}

	runs, keys := countCalls(t, counter)
	wantRuns := map[string]int{"write a": 1, "read r": 1, hangTool + " hang": 2}
	if wantInterrupted {
		wantRuns[hangTool+" hang"] = 1
	}
	for k, n := range wantRuns {
		if runs[k] != n {
			t.Errorf("%s ran %d times, want %d (all: %v)", k, runs[k], n, runs)
		}
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, id+"/") {
			t.Errorf("idempotency key %q does not name the job", k)
		}
	}
	// Both sends of the resent call carry one key.
	if !wantInterrupted && (len(keys) != 4 || keys[2] != keys[3]) {
		t.Errorf("keys %v: the resent call must carry its first key", keys)
	}

	// Three model requests: round 1, round 2 (attempt 1) and round 3
	// (attempt 2, from the journaled round-2 answer).
	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("model got %d requests, want 3", len(reqs))
	}
	var told bool
	for _, m := range reqs[2].Messages {
		if m.Role == llm.RoleTool && strings.Contains(m.Content, "was interrupted") {
			told = true
		}
	}
	if told != wantInterrupted {
		t.Errorf("model told of the interruption: %v, want %v", told, wantInterrupted)
	}

	var interrupted, resumed, replayed int
	var trail []string
	if _, err := client.Watch(ctx, id, func(ev jobs.Event) {
		trail = append(trail, fmt.Sprintf("%s@%d/r%d", ev.Type, ev.Attempt, ev.Round))
		switch ev.Type {
		case agentloop.EventToolInterrupted:
			interrupted++
		case agentloop.EventJobResumed:
			resumed++
		case agentloop.EventToolResult:
			var d map[string]any
			_ = json.Unmarshal(ev.Data, &d)
			if ev.Attempt == 2 && d["journal"] == "resent" {
				replayed++
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if resumed != 1 || (interrupted == 1) != wantInterrupted || (replayed == 1) == wantInterrupted {
		t.Errorf("resumed %d, interrupted %d, resent %d:\n%s", resumed, interrupted, replayed, strings.Join(trail, " "))
	}

	// The journal and checkpoint are gone with the job's end.
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, "AGENT_JOURNAL")
	if err != nil {
		t.Fatal(err)
	}
	if left := journalKeys(ctx, t, kv, id); len(left) > 0 {
		t.Errorf("journal keys left after the job: %v", left)
	}
}

// journalKeys lists the keys of job id in the journal bucket.
func journalKeys(ctx context.Context, t *testing.T, kv jetstream.KeyValue, id string) []string {
	t.Helper()
	w, err := kv.WatchFiltered(ctx, []string{id + ".>"}, jetstream.IgnoreDeletes())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop() //nolint:errcheck
	var keys []string
	for {
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case e := <-w.Updates():
			if e == nil {
				return keys
			}
			keys = append(keys, e.Key())
		}
	}
}
