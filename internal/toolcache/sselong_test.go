package toolcache

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// TestLegacySSECallOutlastsAMinute: a tool call on a legacy SSE server
// that takes longer than a minute is bounded by its caller (the job, the
// server's callTimeout), as on the other transports. mcp-go's SSE client
// gives up on any answer after 60 s unless told otherwise, and failed such
// a call with "timeout waiting for SSE response after 1m0s" whatever the
// job's timeout. The tool takes 61 s, once, so the test does too.
func TestLegacySSECallOutlastsAMinute(t *testing.T) {
	t.Parallel()
	s := server.NewMCPServer("sse", "1", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewToolWithRawSchema("long", "Answers after 61 s.", json.RawMessage(`{"type":"object"}`)),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-time.After(61 * time.Second): // the tool's work, not a wait of the test's
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return mcp.NewToolResultText("done"), nil
		})
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"srv": {URL: serveSSE(t, s, nil), Type: TypeSSE}}})
	v := newTestView(t, p, nil, nil, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	res, err := v.CallTool(ctx, "long", json.RawMessage(`{}`))
	if err != nil || res.Text != "done" {
		t.Fatalf("call: %+v, %v; want done", res, err)
	}
}
