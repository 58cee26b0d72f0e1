package clienttools

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/journal"
	"github.com/jetagent/jetagent/internal/natstest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// TestIdempotencyKeyReachesTheSubmittersTool: a request carries the
// call's idempotency key (the same in every attempt, so "a submitter can
// run a call once", docs/CLIENT-TOOLS.md); Serve hands it to its Handler
// in the context (journal.KeyFromContext), and LocalMCPHandler (submit
// --local-mcp) so passes it to the local MCP server in
// _meta["io.jetagent/idempotency-key"], as the worker does for its own
// servers. Serve dropped it: neither saw a key.
func TestIdempotencyKeyReachesTheSubmittersTool(t *testing.T) {
	t.Parallel()
	const key = "job-key/call_1"
	for _, tc := range []struct {
		name    string
		handler func(got chan<- string) Handler
	}{
		{"handler", func(got chan<- string) Handler {
			return func(ctx context.Context, _ string, _ json.RawMessage) (string, bool, error) {
				got <- journal.KeyFromContext(ctx)
				return "ok", false, nil
			}
		}},
		{"local MCP server", func(got chan<- string) Handler {
			return LocalMCPHandler(keyView(t, got))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := natstest.Start(t)
			worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
			got := make(chan string, 1)
			serve(t, submitter, "job-key", testSecret, tc.handler(got), Options{})
			c := newCaller(t, worker, "job-key", testSecret, Options{Timeout: 10 * time.Second})
			res, err := c.Call(journal.ContextWithKey(natstest.Context(t), key), "note", json.RawMessage(`{}`))
			if err != nil || res.IsError {
				t.Fatalf("call: %v %+v", err, res)
			}
			if k := recv(t, got); k != key {
				t.Errorf("the submitter's tool got idempotency key %q, want %q", k, key)
			}
		})
	}
}

// keyView is a --local-mcp pool's view of an in-process MCP server whose
// tool note sends the idempotency key of each call to got.
func keyView(t *testing.T, got chan<- string) *toolcache.View {
	t.Helper()
	srv := mcpserver.NewMCPServer("local", "1", mcpserver.WithToolCapabilities(true))
	srv.AddTool(mcp.NewTool("note"), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		k := ""
		if m := req.Params.Meta; m != nil {
			k, _ = m.AdditionalFields[journal.MetaKey].(string)
		}
		got <- k
		return mcp.NewToolResultText("ok"), nil
	})
	return serverView(t, srv)
}
