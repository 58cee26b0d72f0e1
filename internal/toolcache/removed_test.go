package toolcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// TestToolRemovedMidJob: a job is offered the tools of the catalog when it
// starts. When the server then drops one from its list (list_changed), the
// job's call of it failed with 'unknown tool: "gone"', though the name is
// in the job's tools array (seen end to end with bin/worker); the error
// now says the server no longer lists it. A view that never had the tool
// still gets the plain unknown tool.
func TestToolRemovedMidJob(t *testing.T) {
	t.Parallel()
	b := server.NewMCPServer("b", "1", server.WithToolCapabilities(true))
	b.AddTool(mcp.NewTool("gone"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("still here"), nil
	})
	b.AddTool(mcp.NewTool("drop"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b.DeleteTools("gone")
		return mcp.NewToolResultText("dropped"), nil
	})
	p := newTestPool(t, Config{},
		WithInProcessServer("a", newTestMCPServer("a"), ServerConfig{}),
		WithInProcessServer("b", b, ServerConfig{}))
	all := newTestView(t, p, nil, nil, nil)
	onlyA, err := p.View(t.Name()+"-a", []string{"a"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = onlyA.Close() })
	denied, err := p.View(t.Name()+"-denied", nil, nil, []string{"gone"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = denied.Close() })
	if got := call(t, all, "gone", nil).Text; got != "still here" {
		t.Fatalf("gone before = %q", got)
	}
	callUntil(t, p, all, "drop", nil, "gone dropped", func(r *Registry) bool { return !r.Has("gone") })
	cases := []struct {
		view *View
		want string
	}{
		{all, `unknown tool: "gone": its server "b" no longer lists it (removed after this job's tools were listed)`},
		{onlyA, `unknown tool: "gone"`},
		{denied, `unknown tool: "gone"`},
	}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := tc.view.CallTool(ctx, "gone", json.RawMessage(`{}`))
		cancel()
		if !errors.Is(err, ErrUnknownTool) || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("gone in view %s: %v; want it to end %q", tc.view.jobID, err, tc.want)
		}
	}
}

// TestRemovedNamesBounded: a server adding and dropping tools without end
// cannot grow what the registry remembers of removed names.
func TestRemovedNamesBounded(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	for i := range 1000 {
		r.replace([]Tool{{Name: fmt.Sprintf("t%d", i), Server: "s", Original: fmt.Sprintf("t%d", i)}})
	}
	if n := len(r.current().removed); n > 4*1+16 {
		t.Fatalf("%d removed names kept", n)
	}
	if _, ok := r.removedTool("t998"); !ok {
		t.Error("the last removed name is not known")
	}
}

// TestToolNameTakenByAnotherServerMidJob: a job was offered server b's
// "gone"; b then dropped it and server a listed a tool of that name, the
// only one now, so it is called "gone". The job's call of "gone", its
// arguments written for b's tool, ran a's tool. It is now refused as b's
// tool removed; a view made after the change calls a's.
func TestToolNameTakenByAnotherServerMidJob(t *testing.T) {
	t.Parallel()
	a := server.NewMCPServer("a", "1", server.WithToolCapabilities(true))
	a.AddTool(mcp.NewTool("ping"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("pong"), nil
	})
	b := server.NewMCPServer("b", "1", server.WithToolCapabilities(true))
	b.AddTool(mcp.NewTool("gone"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("b's gone"), nil
	})
	b.AddTool(mcp.NewTool("swap"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b.DeleteTools("gone")
		a.AddTool(mcp.NewTool("gone"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("a's gone"), nil
		})
		return mcp.NewToolResultText("swapped"), nil
	})
	p := newTestPool(t, Config{}, WithInProcessServer("a", a, ServerConfig{}), WithInProcessServer("b", b, ServerConfig{}))
	byKey := newTestView(t, p, nil, nil, nil) // offered its catalog through CatalogKey, as a job of the loop is
	byKey.CatalogKey()
	byTools := newTestView(t, p, nil, nil, nil)
	byTools.Tools()
	if got := call(t, byKey, "gone", nil).Text; got != "b's gone" {
		t.Fatalf("gone before = %q", got)
	}
	callUntil(t, p, byKey, "swap", nil, "a's gone listed", func(r *Registry) bool {
		g, ok := r.Get("gone")
		return ok && g.Server == "a"
	})
	want := `unknown tool: "gone": its server "b" no longer lists it (removed after this job's tools were listed; the tool of that name now is "a"'s, another tool)`
	for _, v := range []*View{byKey, byTools} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := v.CallTool(ctx, "gone", json.RawMessage(`{}`))
		cancel()
		if !errors.Is(err, ErrUnknownTool) || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("gone in view %s: %v; want it to end %q", v.jobID, err, want)
		}
	}
	later := newTestView(t, p, nil, nil, nil)
	later.CatalogKey()
	if got := call(t, later, "gone", nil).Text; got != "a's gone" {
		t.Errorf("gone in a view made after = %q", got)
	}
}
