package agentloop_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// search_tools ranks on the pool's current catalog, which can change
// while a job runs (list_changed). A server that then listed a tool of
// the name of one of the job's made both server-qualified, and the job's
// own tool, renamed in the index, was left out of every answer: the
// model got "[]" without a word. Tools listed after the job started,
// which it cannot call, were left out the same way. The job's tools are
// now found under the names it was given, and a note says which
// matching tools it cannot call and why.
func TestSearchAfterToolListChanged(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, search string
		want, not    []string
	}{
		{"the job's tool renamed in the index", `{"query":"weather"}`,
			[]string{`"name":"get_weather","server":"a"`, `Note: 2 more tools match ("`, `"b__get_weather"`, `"weather_alerts"`,
				"listed by their servers after this job started, and a job can call only the tools it started with"},
			[]string{`"name":"a__get_weather"`, `"name":"weather_alerts"`}},
		{"only tools listed since", `{"query":"alerts"}`,
			[]string{"Note: 1 more tool matches (\"weather_alerts\"), but it was listed by its server after this job started", "\n[]"}, nil},
		{"server filter", `{"query":"weather","server":"a"}`, []string{`[{"name":"get_weather","server":"a"`}, []string{"Note:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := changingView(t)
			s := llmtest.NewServer(t,
				toolReply(call("call_tool", `{"name":"trigger","arguments":{}}`)),
				toolReply(call("search_tools", tc.search)),
				toolReply(call("call_tool", `{"name":"get_weather","arguments":{"city":"Oslo"}}`)),
				textReply("done"))
			res, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "x", Mode: agentloop.ModeSearch, Tools: v})
			if err != nil {
				t.Fatal(err)
			}
			msgs := toolMessages(res.Messages)
			if len(msgs) != 3 {
				t.Fatalf("tool messages: %s", mustJSON(t, msgs))
			}
			checkContains(t, msgs[1].Content, tc.want, tc.not)
			if msgs[2].Content != "weather in Oslo" {
				t.Errorf("call_tool get_weather answered %q", msgs[2].Content)
			}
		})
	}
}

// changingView is a job's view of two servers, a with get_weather and b
// with trigger, which lists b's own get_weather (so both become
// server-qualified in the pool's catalog) and weather_alerts, and answers
// once the pool has read the new list.
func changingView(t *testing.T) *toolcache.View {
	t.Helper()
	a := server.NewMCPServer("a", "1.0.0", server.WithToolCapabilities(true))
	b := server.NewMCPServer("b", "1.0.0", server.WithToolCapabilities(true))
	text := func(s string) server.ToolHandlerFunc {
		return func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(s), nil
		}
	}
	a.AddTool(mcp.NewToolWithRawSchema("get_weather", "Get the weather for a city.",
		json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("weather in " + req.GetString("city", "?")), nil
		})
	changed := make(chan struct{})
	b.AddTool(mcp.NewToolWithRawSchema("trigger", "Change things.", json.RawMessage(`{"type":"object"}`)),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			b.AddTools(
				server.ServerTool{Tool: mcp.NewToolWithRawSchema("get_weather", "Weather forecast of b.", json.RawMessage(`{"type":"object"}`)), Handler: text("b")},
				server.ServerTool{Tool: mcp.NewToolWithRawSchema("weather_alerts", "Weather alerts for a region.", json.RawMessage(`{"type":"object"}`)), Handler: text("alerts")})
			select {
			case <-changed:
				return mcp.NewToolResultText("changed"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	return changingPoolView(t, func(r *toolcache.Registry) bool { return r.Has("weather_alerts") && r.Has("b__get_weather") },
		changed, namedServer{"a", a}, namedServer{"b", b})
}
