package agentloop_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// Two tools named in Chinese were offered as the same meaningless "_"
// (then told apart only by what else the catalog held). Each now has a
// distinct valid name; a call of it, direct, through call_tool or from
// code, reaches its own tool and is recorded for reflection under the
// name the model used, which the tool's original name maps to.
func TestCJKToolNamesCalled(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		mode agentloop.Mode
		call func(name string) string // the model's call of name, as tool and arguments
	}{
		{agentloop.ModeFull, nil},
		{agentloop.ModeSearch, func(n string) string { return `{"name":"` + n + `","arguments":{}}` }},
		{agentloop.ModeCode, func(n string) string { return `{"code":"return await tools.` + n + `({})"}` }},
	} {
		t.Run(string(tt.mode), func(t *testing.T) {
			t.Parallel()
			s := server.NewMCPServer("intl", "1", server.WithToolCapabilities(true))
			for _, n := range []string{"查询天气", "获取时间"} {
				s.AddTool(mcp.NewTool(n), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.NewToolResultText("called " + req.Params.Name), nil
				})
			}
			v := inProcessView(t, nil, map[string]*server.MCPServer{"intl": s})
			byOrig := map[string]string{}
			for _, tool := range v.Tools() {
				byOrig[tool.Original] = tool.Name
			}
			weather, clock := byOrig["查询天气"], byOrig["获取时间"]
			if weather == clock || !strings.HasPrefix(weather, "tool_") || !strings.HasPrefix(clock, "tool_") {
				t.Fatalf("names %q", byOrig)
			}
			var calls []llmtest.Reply
			for _, n := range []string{weather, clock} {
				c := call(n, `{}`)
				switch tt.mode {
				case agentloop.ModeSearch:
					c = call("call_tool", tt.call(n))
				case agentloop.ModeCode:
					c = call("execute_code", tt.call(n))
				}
				calls = append(calls, toolReply(c))
			}
			ms := llmtest.NewServer(t, append(calls, textReply("done"))...)
			res, err := newLoop(t, ms, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "x", Mode: tt.mode, Tools: v})
			if err != nil {
				t.Fatal(err)
			}
			results := toolMessages(res.Messages)
			if len(results) != 2 || !strings.Contains(results[0].Content, "called 查询天气") || !strings.Contains(results[1].Content, "called 获取时间") {
				t.Fatalf("results %s", mustJSON(t, results))
			}
			if tt.mode == agentloop.ModeFull {
				return // direct calls are their own record
			}
			if len(res.Records) != 2 || res.Records[0].Name != weather || res.Records[1].Name != clock {
				t.Errorf("records %s, want %s then %s", mustJSON(t, res.Records), weather, clock)
			}
		})
	}
}
