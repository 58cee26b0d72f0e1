package agentloop_test

import (
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
)

// A search_tools server filter that names no server of the job says which
// servers the job has and the one it most likely meant: a server the
// pool has but the job was not given answered "no tools are available",
// and a typo only "no server is named".
func TestSearchToolsServerFilterNamesTheJobsServers(t *testing.T) {
	t.Parallel()
	var ts testServer
	servers := map[string]*server.MCPServer{"weather-tools": newTestMCPServer(&ts, false), "other": newTestMCPServer(&ts, false)}
	view := inProcessJobView(t, []string{"weather-tools"}, nil, servers)
	tests := []struct {
		name, search string
		want         []string
		not          []string
	}{
		{"typo", `{"query":"echo","server":"wether-tools"}`,
			[]string{`Note: no server of this job is named "wether-tools"; did you mean "weather-tools"?`, `__echo"`}, nil},
		{"part of the name", `{"query":"echo","server":"weather"}`,
			[]string{`did you mean "weather-tools"?`, `__echo"`}, nil},
		{"a server of the pool the job was not given", `{"query":"echo","server":"other"}`,
			[]string{`Note: no server of this job is named "other"; its servers: "weather-tools".`}, []string{`"name"`, "did you mean"}},
		{"unknown", `{"query":"echo","server":"zzz"}`,
			[]string{`Note: no server of this job is named "zzz"; its servers: "weather-tools".`}, []string{`"name"`}},
		{"right name, other case", `{"query":"echo","server":"Weather-Tools"}`,
			[]string{`__echo"`}, []string{"Note:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := firstToolAnswer(t, agentloop.Input{Task: "x", Mode: agentloop.ModeSearch, Tools: view}, "search_tools", tc.search)
			checkContains(t, out, tc.want, tc.not)
		})
	}
}

// A meta tool reached through call_tool or get_tool_details, as if it were
// in the catalog, is answered with what to do instead of the closest
// catalog names; an empty query says it is empty. The meta tool of the
// other mode called directly (call_tool in code mode, execute_code in
// search mode), as models that know one do, was answered with the
// closest names alone ("search_tools, execute_code, lookup_order, ..."),
// which did not say how the job calls its tools.
func TestMetaToolsMisused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		mode       agentloop.Mode // "": search
		tool, args string
		want       string
	}{
		{"call_tool through call_tool", "", "call_tool", `{"name":"call_tool","arguments":{"name":"echo","arguments":{"text":"hi"}}}`,
			`Error: "call_tool" is not a tool of the catalog: call it directly`},
		{"search_tools through call_tool", "", "call_tool", `{"name":"search_tools","arguments":{"query":"echo"}}`,
			`Error: "search_tools" is not a tool of the catalog: call it directly`},
		{"details of a meta tool", "", "get_tool_details", `{"name":"get_tool_details"}`,
			`Error: "get_tool_details" is not a tool of the catalog: call it directly`},
		{"a catalog tool still", "", "call_tool", `{"name":"echo","arguments":{"text":"hi"}}`, "hi"},
		{"empty query", "", "search_tools", `{"query":"  "}`, "Note: the query is empty; these are the first tools by name."},
		{"call_tool in code mode", agentloop.ModeCode, "call_tool", `{"name":"echo","arguments":{"text":"hi"}}`,
			`Error: unknown tool "call_tool": this job calls its tools from JavaScript: run a script with execute_code, in which each tool is an async function on tools (await tools.NAME({...args}))`},
		{"execute_code in search mode", "", "execute_code", `{"code":"await tools.echo({text:'hi'})"}`,
			`Error: unknown tool "execute_code": this job runs no code: call a tool with call_tool (name and arguments)`},
	}
	var ts testServer
	tools := newToolSet(t, &ts, false)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mode := tc.mode
			if mode == "" {
				mode = agentloop.ModeSearch
			}
			out := firstToolAnswer(t, agentloop.Input{Task: "x", Mode: mode, Tools: tools}, tc.tool, tc.args)
			if !strings.HasPrefix(out, tc.want) {
				t.Errorf("answer %q, want it to begin %q", out, tc.want)
			}
		})
	}
}
