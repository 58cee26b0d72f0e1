package agentloop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/client"
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

// mcpToolSet adapts an mcp-go client to agentloop.ToolSet, the way
// toolcache.View does for pooled sessions.
type mcpToolSet struct {
	c     *client.Client
	tools []toolcache.Tool
}

// newToolSet starts the test MCP server and a client session to it.
func newToolSet(t *testing.T, ts *testServer, withResources bool) *mcpToolSet {
	t.Helper()
	ctx := t.Context()
	c, err := client.NewInProcessClientWithOptions(newTestMCPServer(ts, withResources), client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "agentloop-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	s := &mcpToolSet{c: c}
	for _, mt := range list.Tools {
		raw, err := json.Marshal(mt)
		if err != nil {
			t.Fatal(err)
		}
		var def struct {
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		if err := json.Unmarshal(raw, &def); err != nil {
			t.Fatal(err)
		}
		params, err := toolcache.NormalizeSchema(def.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		s.tools = append(s.tools, toolcache.Tool{
			Name: mt.Name, Original: mt.Name, Server: "test", Description: mt.Description,
			InputSchema: def.InputSchema, Parameters: params,
		})
	}
	return s
}

func (s *mcpToolSet) Tools() []toolcache.Tool { return s.tools }

func (s *mcpToolSet) CallTool(ctx context.Context, name string, args json.RawMessage) (toolcache.Result, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		return toolcache.Result{}, err
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	return toolcache.Result{Text: strings.Join(texts, "\n"), IsError: res.IsError}, nil
}

func (s *mcpToolSet) ListResources(ctx context.Context) ([]toolcache.Resource, error) {
	res, err := s.c.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil {
		return nil, err
	}
	out := make([]toolcache.Resource, len(res.Resources))
	for i, r := range res.Resources {
		out[i] = toolcache.Resource{Server: "test", URI: r.URI, Name: r.Name, Description: r.Description, MIMEType: r.MIMEType}
	}
	return out, nil
}

func (s *mcpToolSet) ReadResource(ctx context.Context, uriOrName string) (string, error) {
	uri := uriOrName
	if !strings.Contains(uri, ":") {
		list, err := s.ListResources(ctx)
		if err != nil {
			return "", err
		}
		for _, r := range list {
			if r.Name == uriOrName {
				uri = r.URI
			}
		}
	}
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	res, err := s.c.ReadResource(ctx, req)
	if err != nil {
		return "", err
	}
	var texts []string
	for _, c := range res.Contents {
		if tc, ok := c.(mcp.TextResourceContents); ok {
			texts = append(texts, tc.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}
