package toolcache

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// TestToolRenamedMidJob: a job is offered the tools of the catalog when
// it starts. When another server then adds a tool of the same name, both
// become server-qualified (echo → a__echo, b__echo), and the job's call
// of echo, a tool of its tools array, failed with 'unknown tool: "echo"'
// (seen end to end with bin/worker: server-everything's echo, then a
// stdio server announcing its own echo by list_changed). The old name now
// still reaches the tool it named, within the view's servers.
func TestToolRenamedMidJob(t *testing.T) {
	t.Parallel()
	b := server.NewMCPServer("b", "1", server.WithToolCapabilities(true))
	b.AddTool(mcp.NewTool("adder", mcp.WithString("name", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := req.GetString("name", "")
			b.AddTool(mcp.NewTool(n, mcp.WithString("text")), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("b's " + n), nil
			})
			return mcp.NewToolResultText("added " + n), nil
		})
	p := newTestPool(t, Config{},
		WithInProcessServer("a", newTestMCPServer("a"), ServerConfig{}),
		WithInProcessServer("b", b, ServerConfig{}))
	all := newTestView(t, p, nil, nil, nil)
	onlyB, err := p.View(t.Name()+"-b", []string{"b"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = onlyB.Close() })
	if got := call(t, all, "echo", map[string]any{"text": "before"}).Text; got != "before" {
		t.Fatalf("echo before = %q", got)
	}
	callUntil(t, p, all, "adder", map[string]any{"name": "echo"}, "echo qualified", func(r *Registry) bool { return r.Has("a__echo") })

	cases := []struct {
		view *View
		name string
		want string // "": unknown tool
	}{
		{all, "echo", "after"},    // the name the job was offered
		{all, "a__echo", "after"}, // its name now
		{all, "b__echo", "b's echo"},
		{onlyB, "echo", ""}, // a's echo is not this view's
		{onlyB, "b__echo", "b's echo"},
		{all, "no_such_tool", ""},
	}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := tc.view.CallTool(ctx, tc.name, json.RawMessage(`{"text":"after"}`))
		cancel()
		switch {
		case tc.want == "" && !errors.Is(err, ErrUnknownTool):
			t.Errorf("%s in view %s: %+v, %v; want unknown tool", tc.name, tc.view.jobID, res, err)
		case tc.want != "" && (err != nil || res.Text != tc.want):
			t.Errorf("%s in view %s: %+v, %v; want %q", tc.name, tc.view.jobID, res, err, tc.want)
		}
	}
}

// TestFormerNamesBounded: former names follow a tool through renames, are
// dropped with the tool or when a current tool takes the name, and stay
// bounded whatever a server does.
func TestFormerNamesBounded(t *testing.T) {
	t.Parallel()
	tool := func(server, name string) Tool { return Tool{Server: server, Original: name} }
	r := NewRegistry([]Tool{tool("a", "echo")})
	steps := []struct {
		tools    []Tool
		resolves map[string]string // former name → current name ("": none)
	}{
		{[]Tool{tool("a", "echo"), tool("b", "echo")}, map[string]string{"echo": "a__echo"}},
		// a third owner: still a's, under the same qualified name
		{[]Tool{tool("a", "echo"), tool("b", "echo"), tool("c", "echo")}, map[string]string{"echo": "a__echo"}},
		// a's echo gone: no former name leads anywhere
		{[]Tool{tool("b", "echo"), tool("c", "echo")}, map[string]string{"echo": "", "a__echo": ""}},
		// c gone: b's echo is echo again, a current name, not a former one
		{[]Tool{tool("b", "echo")}, map[string]string{"echo": "", "b__echo": "echo"}},
	}
	for i, st := range steps {
		named := append([]Tool(nil), st.tools...)
		assignNames(named)
		r.replace(named)
		for from, to := range st.resolves {
			got, ok := r.renamed(from)
			if (to == "" && ok) || (to != "" && (!ok || got.Name != to)) {
				t.Errorf("step %d: renamed(%q) = %q, %v; want %q", i, from, got.Name, ok, to)
			}
		}
	}
	// A server renaming without end: the map stays within its bound.
	for i := range 200 {
		named := []Tool{tool("a", "t"), tool("b", "t"), tool("x", strings.Repeat("n", i%50+1))}
		if i%2 == 0 {
			named = named[1:]
		}
		assignNames(named)
		r.replace(named)
		if n := len(r.current().formerly); n > 4*len(named)+16 {
			t.Fatalf("%d former names for %d tools", n, len(named))
		}
	}
}
