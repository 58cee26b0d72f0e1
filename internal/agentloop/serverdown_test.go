package agentloop_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// A job that names no servers (every server) starts without the tools of
// a server that is down and has never listed them. The model, which knows
// a tool of it from the task or a previous job's history, was answered
// 'unknown tool "read_file"; closest names: ...' with no word that its
// server is down, so it kept guessing names; search_tools found other
// servers' tools, and search_tools of that server said the job had no
// server of that name. The refusal and the search now name the
// unavailable server, why, and that a later job may find it back; a view
// whose servers are all up gets what it got before.
func TestCallOfDownServersTool(t *testing.T) {
	t.Parallel()
	const noteSchema = `{"type":"object","properties":{"text":{"type":"string"}}}`
	for _, tt := range []struct {
		name    string
		mode    agentloop.Mode
		call    string // tool called
		args    string
		down    bool // whether the stopped "files" server is configured
		want    []string
		notWant []string
	}{
		{name: "qualified with the down server's name", mode: agentloop.ModeFull, call: "files__read_file", args: `{}`, down: true,
			want: []string{`unknown tool "files__read_file": its MCP server "files" is unavailable (failed: `,
				"none of its tools are in this job's catalog", "a job started once it is back can call them"},
			notWant: []string{"closest names"}},
		{name: "a bare name", mode: agentloop.ModeFull, call: "read_file", args: `{}`, down: true,
			want: []string{`unknown tool "read_file"`, `MCP server "files" is unavailable (failed: `,
				"it may be one of the tools of a server that is down", "closest names of the available tools: add_note"}},
		{name: "through call_tool", mode: agentloop.ModeSearch, call: "call_tool", args: `{"name":"read_file","arguments":{}}`, down: true,
			want: []string{`unknown tool "read_file"`, `MCP server "files" is unavailable`}},
		{name: "get_tool_details", mode: agentloop.ModeSearch, call: "get_tool_details", args: `{"name":"read_file"}`, down: true,
			want: []string{`unknown tool "read_file"`, `MCP server "files" is unavailable`}},
		{name: "from code, qualified", mode: agentloop.ModeCode, call: "execute_code", args: `{"code":"await tools.files__read_file({})"}`, down: true,
			want: []string{`tools.files__read_file is not a tool of this job: unknown tool "files__read_file": its MCP server "files" is unavailable (failed: `,
				"a job started once it is back can call them"}},
		{name: "from code, a bare name", mode: agentloop.ModeCode, call: "execute_code", args: `{"code":"await tools.read_file({})"}`, down: true,
			want: []string{`tools.read_file is not a tool of this job: unknown tool "read_file"`, `MCP server "files" is unavailable (failed: `,
				"it may be one of the tools of a server that is down"}},
		{name: "from code, every server up", mode: agentloop.ModeCode, call: "execute_code", args: `{"code":"await tools.read_file({})"}`,
			want: []string{"tools.read_file is not a tool of this job (its tools are listed"}, notWant: []string{"unavailable"}},
		{name: "search_tools", mode: agentloop.ModeSearch, call: "search_tools", args: `{"query":"read a file"}`, down: true,
			want: []string{`Note: MCP server "files" is unavailable (failed: `, "its tools are not in this job's catalog", `"add_note"`}},
		{name: "search_tools of the down server", mode: agentloop.ModeSearch, call: "search_tools", args: `{"query":"read a file","server":"files"}`, down: true,
			want:    []string{`Note: MCP server "files" is unavailable (failed: `, "a job started once it is back can"},
			notWant: []string{"no server of this job is named", `"add_note"`}},
		{name: "search_tools, every server up", mode: agentloop.ModeSearch, call: "search_tools", args: `{"query":"add a note"}`,
			want: []string{`"add_note"`}, notWant: []string{"unavailable"}},
		{name: "every server up", mode: agentloop.ModeFull, call: "add_nte", args: `{}`,
			want: []string{`unknown tool "add_nte"; closest names: add_note`}, notWant: []string{"unavailable"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			notes := server.NewMCPServer("notes", "1", server.WithToolCapabilities(true))
			notes.AddTool(mcp.NewToolWithRawSchema("add_note", "Add a note.", json.RawMessage(noteSchema)),
				func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.NewToolResultText("added"), nil
				})
			cfg := toolcache.Config{}
			if tt.down {
				// A real mcp-go server over HTTP, stopped before the worker
				// connects (the worker restarted while it was down).
				files := server.NewMCPServer("files", "1", server.WithToolCapabilities(true))
				files.AddTool(mcp.NewToolWithRawSchema("read_file", "Read a file.", json.RawMessage(`{"type":"object"}`)),
					func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
						return mcp.NewToolResultText("contents"), nil
					})
				hs := httptest.NewServer(server.NewStreamableHTTPServer(files))
				url := hs.URL + "/mcp"
				hs.Close()
				cfg.Servers = map[string]toolcache.ServerConfig{"files": {URL: url}}
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			p, err := toolcache.NewPool(ctx, cfg, toolcache.WithLogger(slog.New(slog.DiscardHandler)),
				toolcache.WithBackoff(time.Hour, time.Hour),
				toolcache.WithInProcessServer("notes", notes, toolcache.ServerConfig{}))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			v, err := p.View(t.Name(), nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = v.Close() })

			ms := llmtest.NewServer(t, toolReply(call(tt.call, tt.args)), textReply("Done."))
			if _, err := newLoop(t, ms, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "Read /etc/motd.", Mode: tt.mode, Tools: v}); err != nil {
				t.Fatal(err)
			}
			results := toolMessages(ms.Requests()[1].Messages)
			if len(results) != 1 {
				t.Fatalf("results %s, want one", mustJSON(t, results))
			}
			for _, w := range tt.want {
				if !strings.Contains(results[0].Content, w) {
					t.Errorf("result %q does not say %q", results[0].Content, w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(results[0].Content, w) {
					t.Errorf("result %q says %q", results[0].Content, w)
				}
			}
		})
	}
}
