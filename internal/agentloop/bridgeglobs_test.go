package agentloop_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// A job's allow/deny globs cover the resource bridge like every other tool:
// denying mcp_* or allowing only some server tools leaves the bridge out
// (it was offered whatever the globs said).
func TestResourceBridgeFollowsTheJobsGlobs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		allow, deny []string
		want        string // the job's tool names, sorted
	}{
		{"no globs", nil, nil, "create_issue,echo,fail,get_weather,mcp_list_resources,mcp_read_resource,meet"},
		{"deny the bridge", nil, []string{"mcp_*"}, "create_issue,echo,fail,get_weather,meet"},
		{"deny one of it", nil, []string{"mcp_read_resource"}, "create_issue,echo,fail,get_weather,mcp_list_resources,meet"},
		{"allow server tools only", []string{"echo", "get_weather"}, nil, "echo,get_weather"},
		{"allow the bridge", []string{"echo", "mcp_*"}, nil, "echo,mcp_list_resources,mcp_read_resource"},
	}
	var ts testServer
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			view := globView(t, tc.allow, tc.deny, map[string]*server.MCPServer{"test": newTestMCPServer(&ts, true)})
			s := llmtest.NewServer(t, textReply("done"))
			if _, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "x", Mode: agentloop.ModeFull, Tools: view}); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range s.Requests()[0].Tools {
				names = append(names, tool.Name)
			}
			if got := strings.Join(slices.Sorted(slices.Values(names)), ","); got != tc.want {
				t.Errorf("tools %s, want %s", got, tc.want)
			}
		})
	}
}

// globView is a job's view of servers with its allow and deny globs.
func globView(t *testing.T, allow, deny []string, servers map[string]*server.MCPServer) *toolcache.View {
	t.Helper()
	p := inProcessPool(t, servers)
	v, err := p.View(t.Name(), nil, allow, deny)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	return v
}
