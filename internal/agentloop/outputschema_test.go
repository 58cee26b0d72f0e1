package agentloop_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// A tool's structuredContent was never checked against its outputSchema:
// a code-mode script declared `count(): Promise<{n: number}>` got
// {"n": "x"}, and the model read it as what the tool promised. A result
// that does not conform is now an error result that says why and keeps
// what the tool sent; a conforming one, and one without structuredContent
// (text only), pass as before.
func TestStructuredResultCheckedAgainstOutputSchema(t *testing.T) {
	t.Parallel()
	const outSchema = `{"type":"object","properties":{"n":{"type":"number"}},"required":["n"]}`
	s := server.NewMCPServer("counts", "1.0.0", server.WithToolCapabilities(true))
	for name, structured := range map[string]any{
		"count_good": map[string]any{"n": 3},
		"count_bad":  map[string]any{"n": "x"},
		"count_text": nil,
	} {
		tool := mcp.NewTool(name, mcp.WithDescription("Count."), mcp.WithRawOutputSchema(json.RawMessage(outSchema)))
		s.AddTool(tool, func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if structured == nil {
				return mcp.NewToolResultText("three"), nil
			}
			b, _ := json.Marshal(structured)
			return mcp.NewToolResultStructured(structured, string(b)), nil
		})
	}
	for _, tc := range []struct {
		name string
		mode agentloop.Mode
		call string // tool name, or the code of execute_code
		want string // in the result the model reads
	}{
		{"conforming", agentloop.ModeFull, "count_good", `{"n":3}`},
		{"text only", agentloop.ModeFull, "count_text", "three"},
		{"not conforming", agentloop.ModeFull, "count_bad", "Error: the result of count_bad does not match the tool's outputSchema:\n- at '/n': got string, want number\nWhat the tool sent: {\"n\":\"x\"}"},
		{"code, conforming", agentloop.ModeCode, "return (await tools.count_good({})).n + 1", "4"},
		{"code, not conforming", agentloop.ModeCode, "try { await tools.count_bad({}) } catch (e) { return 'caught: ' + e.message }", "caught: the result of count_bad does not match the tool's outputSchema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := call(tc.call, `{}`)
			if tc.mode == agentloop.ModeCode {
				args, _ := json.Marshal(map[string]string{"code": tc.call})
				c = call(agentloop.ToolExecuteCode, string(args))
			}
			ms := llmtest.NewServer(t, toolReply(c), textReply("Done."))
			v := inProcessView(t, nil, map[string]*server.MCPServer{"counts": s})
			if _, err := newLoop(t, ms, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "Count.", Mode: tc.mode, Tools: v}); err != nil {
				t.Fatal(err)
			}
			res := toolMessages(ms.Requests()[1].Messages)
			if len(res) != 1 {
				t.Fatalf("results %s", mustJSON(t, res))
			}
			if got := res[0].Content; !strings.Contains(got, tc.want) {
				t.Errorf("result %q, want %q", got, tc.want)
			}
		})
	}
}
