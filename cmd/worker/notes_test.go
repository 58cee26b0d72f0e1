package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// TestGlobNotes: without MCP servers a job's globs are checked against its
// client tools; globs that match say nothing.
func TestGlobNotes(t *testing.T) {
	t.Parallel()
	notes := jobNotes(agentloop.Config{}.WithDefaults(), nil)
	tests := []struct {
		job  jobs.Job
		want string
	}{
		{jobs.Job{Task: "t"}, ""},
		{jobs.Job{Task: "t", Allow: []string{"open_*", "lookup"}, ClientTools: []clienttools.Decl{{Name: "open_door"}, {Name: "look_up"}}},
			`allow "lookup" matches no tool of the job (did you mean "look_up"?)`},
		{jobs.Job{Task: "t", Deny: []string{"*"}}, `deny "*" matches no tool of the job`},
	}
	for _, tt := range tests {
		if got := strings.Join(notes(&tt.job), "; "); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.job, got, tt.want)
		}
	}
}

// TestGlobNotesWithServers: with MCP servers, a glob is checked against
// their tools and the resource bridge, which the globs cover too.
func TestGlobNotesWithServers(t *testing.T) {
	t.Parallel()
	s := server.NewMCPServer("s", "1.0.0", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("read_file", mcp.WithDescription("Read a file.")), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	pool, err := toolcache.NewPool(ctx, toolcache.Config{}, toolcache.WithLogger(slog.New(slog.DiscardHandler)),
		toolcache.WithInProcessServer("fs", s, toolcache.ServerConfig{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Close() })
	notes := jobNotes(agentloop.Config{}.WithDefaults(), pool)
	tests := []struct {
		job  jobs.Job
		want string
	}{
		{jobs.Job{Task: "t", Deny: []string{"mcp_*"}}, ""},
		{jobs.Job{Task: "t", Allow: []string{"read_file", "mcp_read_resource"}}, ""},
		{jobs.Job{Task: "t", Allow: []string{"read_flie"}}, `allow "read_flie" matches no tool of the job (did you mean "read_file"?)`},
	}
	for _, tt := range tests {
		if got := strings.Join(notes(&tt.job), "; "); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.job, got, tt.want)
		}
	}
}
