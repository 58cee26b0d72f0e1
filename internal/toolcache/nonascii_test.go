package toolcache

import (
	"context"
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Tools named in other scripts (a real server's 查询天气 and 获取时间) were
// offered as "_" each, then server-qualified or hash-suffixed by what else
// the catalog held; accented names lost their letters (Café_crème was
// Caf_cr_me). Their names are now distinct, stable and readable where an
// ASCII form exists, and each reaches the tool it names on its server.
func TestNonASCIIToolNamesRoundTrip(t *testing.T) {
	t.Parallel()
	s := server.NewMCPServer("intl", "1", server.WithToolCapabilities(true))
	originals := []string{"查询天气", "获取时间", "Café_crème", "echo"}
	for _, n := range originals {
		s.AddTool(mcp.NewTool(n), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("called " + req.Params.Name), nil
		})
	}
	p := newTestPool(t, Config{}, WithInProcessServer("intl", s, ServerConfig{}))
	v := newTestView(t, p, nil, nil, nil)
	want := map[string]string{ // original → model-facing name
		"查询天气":       "tool_" + shortHash("查询天气"),
		"获取时间":       "tool_" + shortHash("获取时间"),
		"Café_crème": "Cafe_creme",
		"echo":       "echo",
	}
	var names []string
	for _, tool := range v.Tools() {
		names = append(names, tool.Name)
		if w, ok := want[tool.Original]; !ok || tool.Name != w || !ValidName(tool.Name) {
			t.Errorf("%q is offered as %q, want %q", tool.Original, tool.Name, w)
		}
	}
	if len(names) != len(originals) {
		t.Fatalf("names %q, want one per tool of %q", names, originals)
	}
	for orig, name := range want {
		if !slices.Contains(names, name) {
			continue // reported above
		}
		if got := call(t, v, name, map[string]any{}).Text; got != "called "+orig {
			t.Errorf("call %s = %q, want it to reach %q", name, got, orig)
		}
	}
}
