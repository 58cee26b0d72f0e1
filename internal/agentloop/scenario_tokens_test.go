package agentloop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// opsServers are the code-mode scenario's servers: 160 error log lines
// of 4 distinct messages (and warnings), and a ticket tracker.
func opsView(t *testing.T) *toolcache.View {
	t.Helper()
	logs := server.NewMCPServer("logs", "1.0.0", server.WithToolCapabilities(false))
	logs.AddTool(mcp.NewToolWithRawSchema("getLogs", "Read the service's log lines of one level.",
		json.RawMessage(`{"type":"object","properties":{"level":{"type":"string","enum":["error","warn","info"]}},"required":["level"]}`)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			msgs := []string{"database connection refused", "payment gateway timeout", "disk quota exceeded", "certificate expired"}
			var lines []map[string]string
			for i := range 240 {
				l := map[string]string{"ts": fmt.Sprintf("2026-12-01T10:%02d:%02dZ", i/60, i%60), "level": "error", "message": msgs[i%4]}
				if i%3 == 2 {
					l["level"], l["message"] = "warn", fmt.Sprintf("slow request %d", i)
				}
				if l["level"] == req.GetString("level", "") {
					lines = append(lines, l)
				}
			}
			out := map[string]any{"lines": lines}
			b, _ := json.Marshal(out)
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(b))}, StructuredContent: out}, nil
		})
	tickets := server.NewMCPServer("tickets", "1.0.0", server.WithToolCapabilities(false))
	var n atomic.Int64 // the calls of a round run concurrently
	tickets.AddTool(mcp.NewToolWithRawSchema("createTicket", "Open a ticket.",
		json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},"body":{"type":"string"}},"required":["title"]}`)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			out := map[string]any{"id": fmt.Sprintf("T-%d", n.Add(1)), "title": req.GetString("title", "")}
			b, _ := json.Marshal(out)
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(string(b))}, StructuredContent: out}, nil
		})
	return inProcessView(t, nil, map[string]*server.MCPServer{"logs": logs, "tickets": tickets})
}

// TestScenarioTokens measures the prompt tokens (o200k_base, of each
// request body as sent) of the code-mode scenario — read the error logs,
// open one ticket per distinct message — done with direct calls in full
// and search modes and with one script in code mode. The scripted model
// makes the calls a model would; the figures are in docs/BENCHMARKS.md.
func TestScenarioTokens(t *testing.T) {
	t.Parallel()
	distinct := []string{"database connection refused", "payment gateway timeout", "disk quota exceeded", "certificate expired"}
	ticketCalls := func(wrap bool) []llm.ToolCall {
		var cs []llm.ToolCall
		for _, m := range distinct {
			args := fmt.Sprintf(`{"title":%q}`, m)
			if wrap {
				cs = append(cs, call(agentloop.ToolCallTool, fmt.Sprintf(`{"name":"createTicket","arguments":%s}`, args)))
			} else {
				cs = append(cs, call("createTicket", args))
			}
		}
		return cs
	}
	scripts := map[agentloop.Mode][]llmtest.Reply{
		agentloop.ModeFull: {
			toolReply(call("getLogs", `{"level":"error"}`)),
			toolReply(ticketCalls(false)...),
			textReply("Opened 4 tickets."),
		},
		agentloop.ModeSearch: {
			toolReply(call(agentloop.ToolSearchTools, `{"query":"read error logs"}`)),
			toolReply(call(agentloop.ToolCallTool, `{"name":"getLogs","arguments":{"level":"error"}}`)),
			toolReply(call(agentloop.ToolSearchTools, `{"query":"create ticket"}`)),
			toolReply(ticketCalls(true)...),
			textReply("Opened 4 tickets."),
		},
		agentloop.ModeCode: {
			toolReply(codeCall(`const {lines} = await tools.getLogs({level: "error"});
const distinct = [...new Set(lines.map(l => l.message))];
const ids = [];
for (const m of distinct) ids.push((await tools.createTicket({title: m})).id);
console.log(lines.length + " error lines, " + distinct.length + " distinct, tickets " + ids.join(","));`)),
			textReply("Opened 4 tickets."),
		},
	}
	tokens := map[agentloop.Mode]int{}
	for _, mode := range []agentloop.Mode{agentloop.ModeFull, agentloop.ModeSearch, agentloop.ModeCode} {
		s := llmtest.NewServer(t, scripts[mode]...)
		res, err := newLoop(t, s, agentloop.Config{MaxToolOutput: 1 << 20}).Run(t.Context(), agentloop.Input{Task: "Open one ticket per distinct error in the logs.", Tools: opsView(t), Mode: mode})
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if !strings.Contains(res.Answer, "4 tickets") {
			t.Fatalf("%s: answer %q", mode, res.Answer)
		}
		total := 0
		for _, r := range s.Requests() {
			n, err := toolcache.CountTokens(string(r.Raw))
			if err != nil {
				t.Fatal(err)
			}
			total += n
		}
		tokens[mode] = total
		t.Logf("%-6s requests %d, prompt tokens %d", mode, len(s.Requests()), total)
	}
	t.Logf("code/full %.3f, code/search %.3f", float64(tokens[agentloop.ModeCode])/float64(tokens[agentloop.ModeFull]),
		float64(tokens[agentloop.ModeCode])/float64(tokens[agentloop.ModeSearch]))
	if tokens[agentloop.ModeCode]*3 > tokens[agentloop.ModeFull] || tokens[agentloop.ModeCode]*3 > tokens[agentloop.ModeSearch] {
		t.Errorf("code mode is not a third of the others: %v", tokens)
	}
}
