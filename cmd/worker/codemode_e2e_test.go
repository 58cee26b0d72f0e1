//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/journal"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// The code-mode scenario's MCP servers: this test binary run with
// opsRoleEnv=logs (error logs) or tickets (creates tickets, deduplicated
// by the call's idempotency key, so it declares idempotentHint; each new
// ticket is appended to <opsDirEnv>/tickets; with opsHangEnv=N the N-th
// new ticket is written down and the call then never returns).
const (
	opsRoleEnv = "JETAGENT_TEST_OPS_ROLE"
	opsDirEnv  = "JETAGENT_TEST_OPS_DIR"
	opsHangEnv = "JETAGENT_TEST_OPS_HANG"
)

// opsLogMessages are the distinct error messages of the log server; it
// serves opsLogLines lines, each message many times, and warnings.
var opsLogMessages = []string{
	"database connection refused", "payment gateway timeout", "disk quota exceeded", "certificate expired",
}

const opsLogLines = 240

func init() {
	switch os.Getenv(opsRoleEnv) {
	case "logs":
		os.Exit(serveOps(logsServer()))
	case "tickets":
		os.Exit(serveOps(ticketsServer(os.Getenv(opsDirEnv), os.Getenv(opsHangEnv))))
	}
}

func serveOps(s *mcpserver.MCPServer) int {
	if err := mcpserver.ServeStdio(s); err != nil {
		return 1
	}
	return 0
}

func logsServer() *mcpserver.MCPServer {
	s := mcpserver.NewMCPServer("logs", "1.0.0", mcpserver.WithToolCapabilities(false))
	tool := mcp.NewToolWithRawSchema("getLogs", "Read the service's log lines of one level.",
		json.RawMessage(`{"type":"object","properties":{"level":{"type":"string","enum":["error","warn","info"],"description":"Level of the lines."}},"required":["level"],"additionalProperties":false}`))
	tool.OutputSchema = mcp.ToolOutputSchema{Type: "object", Properties: map[string]any{"lines": map[string]any{"type": "array", "items": map[string]any{
		"type": "object", "properties": map[string]any{"ts": map[string]any{"type": "string"}, "level": map[string]any{"type": "string"}, "message": map[string]any{"type": "string"}},
	}}}}
	tool.Annotations.ReadOnlyHint = mcp.ToBoolPtr(true)
	s.AddTool(tool, func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		level := req.GetString("level", "")
		type line struct {
			TS      string `json:"ts"`
			Level   string `json:"level"`
			Message string `json:"message"`
		}
		var lines []line
		for i := range opsLogLines {
			l := line{TS: fmt.Sprintf("2026-12-01T10:%02d:%02dZ", i/60, i%60), Level: "error", Message: opsLogMessages[i%len(opsLogMessages)]}
			if i%3 == 2 {
				l.Level, l.Message = "warn", "slow request "+strconv.Itoa(i)
			}
			if l.Level == level {
				lines = append(lines, l)
			}
		}
		out := map[string]any{"lines": lines}
		text, _ := json.Marshal(out)
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(text))}, StructuredContent: out}, nil
	})
	return s
}

func ticketsServer(dir, hang string) *mcpserver.MCPServer {
	hangAt, _ := strconv.Atoi(hang)
	var mu sync.Mutex
	s := mcpserver.NewMCPServer("tickets", "1.0.0", mcpserver.WithToolCapabilities(false))
	tool := mcp.NewToolWithRawSchema("createTicket", "Open a ticket. Calls with the same idempotency key open one ticket.",
		json.RawMessage(`{"type":"object","properties":{"title":{"type":"string","minLength":1},"body":{"type":"string"}},"required":["title"],"additionalProperties":false}`))
	tool.Annotations.IdempotentHint = mcp.ToBoolPtr(true)
	s.AddTool(tool, func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		key := ""
		if m := req.Params.Meta; m != nil {
			key, _ = m.AdditionalFields[journal.MetaKey].(string)
		}
		mu.Lock()
		tickets := readTickets(filepath.Join(dir, "tickets"))
		id, seen := 0, false
		for i, tk := range tickets {
			if key != "" && tk.key == key {
				id, seen = i+1, true
			}
		}
		if !seen {
			f, err := os.OpenFile(filepath.Join(dir, "tickets"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				mu.Unlock()
				return nil, err
			}
			fmt.Fprintf(f, "%s\t%s\n", key, req.GetString("title", ""))
			_ = f.Sync()
			_ = f.Close()
			id = len(tickets) + 1
		}
		mu.Unlock()
		if !seen && id == hangAt {
			<-ctx.Done() // the worker dies with this call in flight
			return nil, ctx.Err()
		}
		out := map[string]any{"id": "T-" + strconv.Itoa(id), "title": req.GetString("title", "")}
		text, _ := json.Marshal(out)
		return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(text))}, StructuredContent: out}, nil
	})
	return s
}

type ticket struct{ key, title string }

func readTickets(file string) []ticket {
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []ticket
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "\t"); ok {
			out = append(out, ticket{k, v})
		}
	}
	return out
}

// opsScript is what the scripted model writes: read the error logs,
// deduplicate the messages, open one ticket per distinct message.
const opsScript = `const {lines} = await tools.getLogs({level: "error"});
const distinct = [...new Set(lines.map(l => l.message))];
const made = [];
for (const m of distinct) {
  const t = await tools.createTicket({title: m, body: "seen " + lines.filter(l => l.message === m).length + " times"});
  made.push(t.id);
}
console.log(lines.length + " error lines, " + distinct.length + " distinct, tickets " + made.join(","));
return made.length;`

// TestCodeModeScenario is the code-mode scenario end to end through NATS
// and real processes: worker, two stdio MCP servers, the scripted model
// writing the script. "runs": the tickets, events and reflected
// transcript. "crash": the worker is SIGKILLed while the script creates
// its third ticket; the next attempt runs the script again, its completed
// calls (the logs, two tickets) come from the journal, the interrupted
// idempotent createTicket is resent with its key (the server opens no
// second ticket), and the script finishes: no ticket twice.
func TestCodeModeScenario(t *testing.T) {
	t.Parallel()
	for _, crash := range []bool{false, true} {
		name := "runs"
		if crash {
			name = "crash"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			codeModeScenario(t, crash)
		})
	}
}

func codeModeScenario(t *testing.T, crash bool) {
	needMCPServer(t)
	ctx := natstest.Context(t)
	id := "ops-" + strconv.FormatBool(crash)
	ns, nc := startCrashNATS(t)

	model := llmtest.NewServer(t)
	model.Handle(func(req llmtest.RecordedRequest) llmtest.Reply {
		for _, m := range req.Messages {
			if m.Role == llm.RoleTool {
				return llmtest.Reply{Content: "Opened a ticket per distinct error."}
			}
		}
		args, _ := json.Marshal(map[string]string{"code": opsScript})
		return llmtest.Reply{ToolCalls: []llm.ToolCall{{Function: llm.FunctionCall{Name: agentloop.ToolExecuteCode, Arguments: string(args)}}}}
	})

	dir := t.TempDir()
	mcpConfig := func(hang int) string {
		env := map[string]string{opsRoleEnv: "tickets", opsDirEnv: dir}
		if hang > 0 {
			env[opsHangEnv] = strconv.Itoa(hang)
		}
		b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
			"logs":    map[string]any{"command": os.Args[0], "args": []string{"-test.run=^$"}, "env": map[string]string{opsRoleEnv: "logs"}},
			"tickets": map[string]any{"command": os.Args[0], "args": []string{"-test.run=^$"}, "env": env},
		}})
		f := filepath.Join(t.TempDir(), "mcp.json")
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	base := crashWorkerEnv(t, ns.ClientURL(), model.URL())
	hang := 0
	if crash {
		hang = 3
	}
	env := append(append([]string(nil), base...), "JETAGENT_MCP_CONFIG="+mcpConfig(hang), "JETAGENT_TOOL_MODE=code")

	first, client := startFirstWorker(ctx, t, nc, "first", env)
	if _, err := client.Submit(ctx, &jobs.Job{ID: id, Task: "Open one ticket per distinct error in the logs."}); err != nil {
		t.Fatal(err)
	}
	last := first
	if crash {
		for len(readTickets(filepath.Join(dir, "tickets"))) < 3 {
			select {
			case <-ctx.Done():
				t.Fatal("the third ticket was never opened")
			case <-time.After(20 * time.Millisecond): // a file another process writes: nothing to wait on
			}
		}
		first.kill(t)
		first.checkChildrenExit(t)
		env2 := append(append([]string(nil), base...), "JETAGENT_MCP_CONFIG="+mcpConfig(0), "JETAGENT_TOOL_MODE=code")
		last = startChildWorker(t, "second", env2)
	}
	defer last.stop(t)
	st, err := client.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	wantAttempt := 1
	if crash {
		wantAttempt = 2
	}
	if st.Status != jobs.StatusSucceeded || st.Attempt != wantAttempt {
		t.Fatalf("state %+v", st)
	}

	// One ticket per distinct message, none twice.
	tickets := readTickets(filepath.Join(dir, "tickets"))
	titles := map[string]int{}
	for _, tk := range tickets {
		titles[tk.title]++
		if !strings.HasPrefix(tk.key, id+"/") {
			t.Errorf("ticket %q opened without the job's idempotency key (%q)", tk.title, tk.key)
		}
	}
	if len(tickets) != len(opsLogMessages) || len(titles) != len(opsLogMessages) {
		t.Errorf("tickets %v, want one per distinct message %v", tickets, opsLogMessages)
	}

	// What the model saw: the script's printout, not the 160 log lines.
	reqs := model.Requests()
	final := reqs[len(reqs)-1]
	var out string
	for _, m := range final.Messages {
		if m.Role == llm.RoleTool {
			out = m.Content
		}
	}
	want := fmt.Sprintf("%d error lines, %d distinct, tickets T-1,T-2,T-3,T-4", opsLogLines-opsLogLines/3, len(opsLogMessages))
	if !strings.Contains(out, want) {
		t.Errorf("execute_code answered %q, want %q", out, want)
	}
	if strings.Contains(out, "database connection refused") {
		t.Errorf("raw log lines reached the model: %q", out)
	}

	// Events: inner calls marked as from code; in the crash case the
	// resent ticket says so and nothing was interrupted.
	evs := readJobEvents(t, ctx, nc, id)
	checkEventSchemas(t, evs)
	checkOneAttemptAtATime(t, evs)
	inner, resent, interrupted := 0, 0, 0
	for _, e := range evs {
		var d map[string]any
		_ = json.Unmarshal(e.Data, &d)
		switch e.Type {
		case agentloop.EventToolResult:
			if d["from"] == agentloop.ToolExecuteCode {
				inner++
			}
			if d["journal"] == "resent" {
				resent++
			}
		case agentloop.EventToolInterrupted:
			interrupted++
		}
	}
	// Without a crash: getLogs + 4 tickets. With one: attempt 1 published
	// getLogs and two tickets; attempt 2 replays those silently and
	// publishes the resent third and the last.
	wantInner, wantResent := 5, 0
	if crash {
		wantInner, wantResent = 5, 1
	}
	if inner != wantInner || resent != wantResent || interrupted != 0 {
		t.Errorf("inner results %d (want %d), resent %d (want %d), interrupted %d", inner, wantInner, resent, wantResent, interrupted)
	}

	// The reflected transcript lists the real calls in order.
	b, err := client.Transcript(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	var tr jobs.Transcript
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatal(err)
	}
	var calls []string
	for _, m := range tr.Messages {
		for _, c := range m.ToolCalls {
			calls = append(calls, c.Function.Name)
		}
	}
	if got := strings.Join(calls, ","); got != "getLogs,createTicket,createTicket,createTicket,createTicket" {
		t.Errorf("reflected calls %s", got)
	}
	checkCoherent(t, "reflected", tr.Messages)
}
