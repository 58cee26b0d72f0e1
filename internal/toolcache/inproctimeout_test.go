package toolcache

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// An in-process server's tool handler that does not watch its context:
// mcp-go runs it in the caller's goroutine, so the call outlived the
// server's callTimeout (and the job's deadline) until the handler
// returned. It ends at the callTimeout, saying so; a handler's panic
// still reaches the caller, whose recovery (the agent loop's) makes it
// that call's error.
func TestInProcessCallTimeout(t *testing.T) {
	t.Parallel()
	s := server.NewMCPServer("deaf", "1", server.WithToolCapabilities(true))
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	s.AddTool(mcp.NewTool("deaf"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-release // ignores ctx
		return mcp.NewToolResultText("late"), nil
	})
	s.AddTool(mcp.NewTool("boom"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		panic("kaboom")
	})
	p := newTestPool(t, Config{}, WithInProcessServer("deaf", s, ServerConfig{CallTimeout: Duration(200 * time.Millisecond)}))
	v := newTestView(t, p, nil, nil, nil)

	type answer struct {
		res Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := v.CallTool(context.Background(), "deaf", nil)
		done <- answer{res, err}
	}()
	select {
	case a := <-done:
		if !errors.Is(a.err, context.DeadlineExceeded) || !strings.Contains(a.err.Error(), "callTimeout of 200ms") {
			t.Errorf("call = %+v, %v; want the callTimeout's error", a.res, a.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the call outlived its callTimeout of 200ms by 20 s")
	}

	func() {
		defer func() {
			if p := recover(); p != "kaboom" {
				t.Errorf("recovered %v, want the handler's panic", p)
			}
		}()
		_, _ = v.CallTool(context.Background(), "boom", nil)
		t.Error("the handler's panic did not reach the caller")
	}()
}
