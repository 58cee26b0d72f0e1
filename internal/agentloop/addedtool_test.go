package agentloop_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// A job's tools are those of the catalog when it started. A server that
// adds a tool while the job runs (the example server's delete_note,
// listed once a note exists) left the model, which learnt the new name
// from a result, with 'unknown tool "delete_note"; closest names: ...',
// which does not say why. The refusal now says the server added it after
// the job started.
func TestToolAddedMidJobNamed(t *testing.T) {
	t.Parallel()
	for _, mode := range []agentloop.Mode{agentloop.ModeFull, agentloop.ModeSearch, agentloop.ModeCode} {
		// Code mode's tools object said only "tools.delete_note is not a
		// tool of this job"; it now gives the reason too.
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			create, del := call("create_note", `{}`), call("delete_note", `{}`)
			switch mode {
			case agentloop.ModeSearch:
				create, del = call("call_tool", `{"name":"create_note","arguments":{}}`), call("call_tool", `{"name":"delete_note","arguments":{}}`)
			case agentloop.ModeCode:
				create, del = call("execute_code", `{"code":"await tools.create_note({})"}`), call("execute_code", `{"code":"await tools.delete_note({})"}`)
			}
			ms := llmtest.NewServer(t, toolReply(create), toolReply(del), textReply("Done."))
			if _, err := newLoop(t, ms, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "Note, then delete it.", Mode: mode, Tools: notesView(t)}); err != nil {
				t.Fatal(err)
			}
			results := toolMessages(ms.Requests()[2].Messages)
			want := `unknown tool "delete_note": its server "notes" added it after this job started`
			if len(results) != 2 || !strings.Contains(results[1].Content, want) {
				t.Errorf("results %s, want the second to say %q", mustJSON(t, results), want)
			}
		})
	}
}

// notesView is a job's view of a server whose create_note adds the tool
// delete_note; create_note answers once the pool has read the new list.
func notesView(t *testing.T) *toolcache.View {
	t.Helper()
	s := server.NewMCPServer("notes", "1.0.0", server.WithToolCapabilities(true))
	added := make(chan struct{})
	s.AddTool(mcp.NewToolWithRawSchema("create_note", "Create a note.", json.RawMessage(`{"type":"object"}`)),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// Sends notifications/tools/list_changed; the answer waits until
			// the pool has read the new list, so the next round sees it.
			s.AddTool(mcp.NewToolWithRawSchema("delete_note", "Delete a note.", json.RawMessage(`{"type":"object"}`)),
				func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.NewToolResultText("deleted"), nil
				})
			select {
			case <-added:
				return mcp.NewToolResultText("created note 1 (delete_note deletes it)"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	return changingPoolView(t, func(r *toolcache.Registry) bool { return r.Has("delete_note") }, added, namedServer{"notes", s})
}

// namedServer is an in-process MCP server and the name the pool gives it.
type namedServer struct {
	name string
	s    *server.MCPServer
}

// changingPoolView is a job's view of a pool of in-process servers whose
// tool lists change while a job runs: ready is closed once the pool's
// registry satisfies listed (the servers' new lists read), which a
// server's handler waits for so that the next round sees them.
func changingPoolView(t *testing.T, listed func(*toolcache.Registry) bool, ready chan struct{}, srvs ...namedServer) *toolcache.View {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	opts := []toolcache.Option{toolcache.WithLogger(slog.New(slog.DiscardHandler))}
	for _, n := range srvs {
		opts = append(opts, toolcache.WithInProcessServer(n.name, n.s, toolcache.ServerConfig{}))
	}
	p, err := toolcache.NewPool(ctx, toolcache.Config{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	var once sync.Once
	p.Registry().OnChange(func() {
		if listed(p.Registry()) {
			once.Do(func() { close(ready) })
		}
	})
	v, err := p.View(t.Name(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	return v
}
