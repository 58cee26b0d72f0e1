package agentloop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/toolcache"
)

// Schemas of the test server's tools, sent verbatim over MCP.
const (
	weatherSchema = `{"type":"object","properties":{"city":{"type":"string","description":"City name."},"units":{"type":"string","enum":["c","f"],"description":"Temperature units."}},"required":["city"],"additionalProperties":false}`
	issueSchema   = `{"type":"object","properties":{"repo":{"type":"object","properties":{"owner":{"type":"string"},"name":{"type":"string"}},"required":["owner","name"],"additionalProperties":false},"title":{"type":"string","minLength":1},"labels":{"type":"array","items":{"type":"string","enum":["bug","feature","docs"]}},"priority":{"type":"integer","minimum":1,"maximum":5}},"required":["repo","title"],"additionalProperties":false}`
	echoSchema    = `{"type":"object","properties":{"text":{"type":"string"},"repeat":{"type":"integer","minimum":1}},"required":["text"]}`
	meetSchema    = `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`
)

// testServer is a real mcp-go server, reached over the in-process transport.
type testServer struct {
	calls atomic.Int64 // tools/call requests the server handled

	// meet: each call waits until meetWant calls are inside at once, which
	// only happens when the loop runs them concurrently.
	meetMu   sync.Mutex
	meetWant int
	meetIn   int
	meetAll  chan struct{}
}

func newTestMCPServer(ts *testServer, withResources bool) *server.MCPServer {
	s := server.NewMCPServer("agentloop-test", "1.0.0", server.WithToolCapabilities(true), server.WithResourceCapabilities(false, false))
	add := func(name, desc, schema string, h server.ToolHandlerFunc) {
		s.AddTool(mcp.NewToolWithRawSchema(name, desc, json.RawMessage(schema)), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ts.calls.Add(1)
			return h(ctx, req)
		})
	}
	add("get_weather", "Get the current weather for a city.\nReturns temperature and conditions. Uses a live forecast service.", weatherSchema,
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(fmt.Sprintf("weather in %s: 21%s, sunny", req.GetString("city", "?"), req.GetString("units", "c"))), nil
		})
	add("create_issue", "Create an issue in a repository. Labels must be known labels.", issueSchema,
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("created issue #7: " + req.GetString("title", "")), nil
		})
	add("echo", "Echo text back, optionally repeated.", echoSchema,
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := 1
			if r, ok := req.GetArguments()["repeat"].(float64); ok {
				n = int(r)
			}
			return mcp.NewToolResultText(strings.Repeat(req.GetString("text", ""), n)), nil
		})
	add("fail", "A tool that always fails.", `{"type":"object"}`,
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultError("the backend is down"), nil
		})
	add("meet", "Wait for the other meet calls of the same round.", meetSchema,
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ts.meetMu.Lock()
			ts.meetIn++
			if ts.meetIn == ts.meetWant {
				close(ts.meetAll)
			}
			all := ts.meetAll
			ts.meetMu.Unlock()
			select {
			case <-all:
				return mcp.NewToolResultText("met " + req.GetString("id", "")), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	if withResources {
		s.AddResource(mcp.NewResource("file:///notes.txt", "notes", mcp.WithMIMEType("text/plain"), mcp.WithResourceDescription("Meeting notes.")),
			func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
				return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: "text/plain", Text: "buy milk"}}, nil
			})
	}
	return s
}

// newToolSet serves the test MCP server through a real toolcache pool (the
// in-process transport) and returns a job's view of it, as the worker does.
func newToolSet(t *testing.T, ts *testServer, withResources bool) *toolcache.View {
	t.Helper()
	return inProcessView(t, nil, map[string]*server.MCPServer{"test": newTestMCPServer(ts, withResources)})
}

// inProcessView serves servers (name → mcp-go server) through a real
// toolcache pool over the in-process transport and returns a job's view
// of it that denies the tools deny names, as the worker does.
func inProcessView(t *testing.T, deny []string, servers map[string]*server.MCPServer) *toolcache.View {
	t.Helper()
	return inProcessJobView(t, nil, deny, servers)
}

// inProcessJobView is inProcessView for a job given only the servers
// jobServers (nil: all).
func inProcessJobView(t *testing.T, jobServers, deny []string, servers map[string]*server.MCPServer) *toolcache.View {
	t.Helper()
	p := inProcessPool(t, servers)
	v, err := p.View(t.Name(), jobServers, nil, deny)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	if len(v.Tools()) == 0 {
		t.Fatalf("pool has no tools: %+v", p.Status())
	}
	return v
}

// inProcessPool serves servers (name → mcp-go server) through a real
// toolcache pool over the in-process transport, closed with the test.
func inProcessPool(t *testing.T, servers map[string]*server.MCPServer) *toolcache.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	opts := []toolcache.Option{toolcache.WithLogger(slog.New(slog.DiscardHandler))}
	for name, s := range servers {
		opts = append(opts, toolcache.WithInProcessServer(name, s, toolcache.ServerConfig{}))
	}
	p, err := toolcache.NewPool(ctx, toolcache.Config{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("pool close: %v", err)
		}
	})
	return p
}
