package agentrun_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/agentrun"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// TestNamedServerDown: a job that names a server which failed to start
// (seen end to end: a stdio server exiting at once) ran without its tools,
// the model answered without them, and the job succeeded, with no word of
// the server to anyone. It is handed back now, and dead-lettered with the
// server's reason once its deliveries are used up; a job naming only
// servers that are up, or naming none (every server), runs.
func TestNamedServerDown(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		servers []string
		status  jobs.Status
		reason  []string // in the job's error
	}{
		{"names the failed server", []string{"down"}, jobs.StatusDead,
			[]string{`MCP server "down" is failed`, "cannot open the database"}},
		{"names it and a good one", []string{"up", "down"}, jobs.StatusDead, []string{`"down" is failed`}},
		{"names the good one", []string{"up"}, jobs.StatusSucceeded, nil},
		{"names none: every server", nil, jobs.StatusSucceeded, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := server.NewMCPServer("up", "1")
			up.AddTool(mcp.NewTool("ping_up"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("pong"), nil
			})
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			pool, err := toolcache.NewPool(ctx, toolcache.Config{Servers: map[string]toolcache.ServerConfig{
				"down": {Command: "sh", Args: []string{"-c", "echo 'fatal: cannot open the database' >&2; exit 3"}},
			}},
				toolcache.WithInProcessServer("up", up, toolcache.ServerConfig{}),
				toolcache.WithBackoff(time.Hour, time.Hour),
				toolcache.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = pool.Close() })
			h := start(t, agentloop.Config{}, agentrun.Config{Pool: pool})
			h.model.Handle(func(llmtest.RecordedRequest) llmtest.Reply { return llmtest.Reply{Content: "done"} })
			st := h.run(t, &jobs.Job{Task: "x", ToolMode: "full", Servers: tt.servers})
			if st.Status != tt.status {
				t.Fatalf("status %s (%s), want %s", st.Status, st.Error, tt.status)
			}
			for _, want := range tt.reason {
				if !strings.Contains(st.Error, want) {
					t.Errorf("error %q does not say %q", st.Error, want)
				}
			}
			if tt.status == jobs.StatusDead && len(h.model.Requests()) != 0 {
				t.Errorf("the model was asked %d times for a job that could not run", len(h.model.Requests()))
			}
		})
	}
}
