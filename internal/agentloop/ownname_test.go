package agentloop_test

import (
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// A tool the catalog offers server-qualified (two servers list a tool of
// that name) called by its server's own name, the one its documentation
// uses ("get_weather" for "weather-tools__get_weather"), was an unknown
// tool, in any mode and through call_tool or get_tool_details. It now
// runs the one tool of the job's it fits; a name that fits several, or
// only a tool the job's globs deny, is still refused.
func TestCallByServersOwnName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		deny []string
		mode agentloop.Mode
		tool string
		args string
		want string // the answer's start
		rec  string // the reflected call's tool; "" for none
	}{
		{"call_tool", []string{"other__*"}, agentloop.ModeSearch, "call_tool", `{"name":"get_weather","arguments":{"city":"Oslo"}}`,
			"weather in Oslo", "weather-tools__get_weather"},
		{"call_tool, another case and a dash", []string{"other__*"}, agentloop.ModeSearch, "call_tool", `{"name":"GET-WEATHER","arguments":{"city":"Oslo"}}`,
			"weather in Oslo", "weather-tools__get_weather"},
		{"get_tool_details", []string{"other__*"}, agentloop.ModeSearch, "get_tool_details", `{"name":"get_weather"}`,
			`{"name":"weather-tools__get_weather",`, ""},
		{"direct call", []string{"other__*"}, agentloop.ModeFull, "get_weather", `{"city":"Oslo"}`, "weather in Oslo", ""},
		{"two servers' tools of the name", nil, agentloop.ModeSearch, "call_tool", `{"name":"get_weather","arguments":{"city":"Oslo"}}`,
			`Error: unknown tool "get_weather"; closest names: other__get_weather, weather-tools__get_weather`, ""},
		{"a tool the job's globs deny", []string{"*create_issue", "other__*"}, agentloop.ModeSearch, "call_tool", `{"name":"create_issue","arguments":{"title":"x"}}`,
			`Error: unknown tool "create_issue"; closest names: `, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			view := inProcessView(t, tc.deny, map[string]*server.MCPServer{"weather-tools": newTestMCPServer(&ts, false), "other": newTestMCPServer(&ts, false)})
			s := llmtest.NewServer(t, toolReply(call(tc.tool, tc.args)), textReply("done"))
			res, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "x", Mode: tc.mode, Tools: view})
			if err != nil {
				t.Fatal(err)
			}
			out := toolMessages(res.Messages)[0].Content
			if !strings.HasPrefix(out, tc.want) {
				t.Errorf("answer %q, want it to begin %q", out, tc.want)
			}
			if strings.Contains(out, "__create_issue") {
				t.Errorf("the answer names a denied tool: %s", out)
			}
			if tc.mode == agentloop.ModeFull {
				// History shows the call that ran.
				if got := res.Messages[1].ToolCalls[0].Function.Name; got != "weather-tools__get_weather" {
					t.Errorf("history's call is of %q", got)
				}
			}
			if tc.rec != "" && (len(res.Records) != 1 || res.Records[0].Name != tc.rec) {
				t.Errorf("records %s, want a call of %s", mustJSON(t, res.Records), tc.rec)
			}
		})
	}
}
