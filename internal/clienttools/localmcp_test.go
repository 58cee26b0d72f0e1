package clienttools

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/natstest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// localView is a toolcache view on a real in-process mcp-go server, as the
// submitter's --local-mcp pool would be.
func localView(t *testing.T) *toolcache.View {
	t.Helper()
	srv := mcpserver.NewMCPServer("local", "1", mcpserver.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("shout", mcp.WithDescription("Upper-cases text"), mcp.WithString("text", mcp.Required())),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			text, err := req.RequireString("text")
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			return mcp.NewToolResultText(strings.ToUpper(text)), nil
		})
	return serverView(t, srv)
}

// serverView is a --local-mcp pool's view of srv, served in process as
// the server "local".
func serverView(t *testing.T, srv *mcpserver.MCPServer) *toolcache.View {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := toolcache.NewPool(ctx, toolcache.Config{},
		toolcache.WithInProcessServer("local", srv, toolcache.ServerConfig{}),
		toolcache.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	v, err := p.View("submitter", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	return v
}

func TestLocalMCP(t *testing.T) {
	t.Parallel()
	v := localView(t)
	decls := LocalMCPDecls(v)
	if len(decls) != 1 || decls[0].Name != "shout" || decls[0].Description != "Upper-cases text" {
		t.Fatalf("decls %+v", decls)
	}
	if err := ValidateDecls(decls, DeclLimits{}); err != nil {
		t.Fatal(err)
	}
	s := natstest.Start(t)
	worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
	serve(t, submitter, "job-local", testSecret, LocalMCPHandler(v), Options{})
	c := newCaller(t, worker, "job-local", testSecret, Options{Timeout: 10 * time.Second})
	tests := []struct {
		name, tool, args, want string
		isErr                  bool
	}{
		{"tool result", "shout", `{"text":"quiet"}`, "QUIET", false},
		{"tool error", "shout", `{}`, "text", true},
		{"unknown tool", "whisper", `{}`, "unknown tool", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := c.Call(natstest.Context(t), tt.tool, json.RawMessage(tt.args))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(res.Text, tt.want) || res.IsError != tt.isErr {
				t.Errorf("got %q (isError %v), want %q (isError %v)", res.Text, res.IsError, tt.want, tt.isErr)
			}
		})
	}
}
