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

// An answer over the 64 MiB message bound (seen end to end: the reference
// filesystem server's read_text_file of a 34 MiB file, whose answer
// carries the text twice, escaped) broke the shared stdio session: the
// call failed "MCP session lost (the request may or may not have run)",
// so did every other job's call in flight on that session, and the server
// was restarted; so on a legacy SSE session, whose answers share one
// stream. The answer is now dropped and its call fails with the reason;
// the session, and the calls around it, go on.
func TestOversizedAnswerKeepsTheSession(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"huge", "hugelast", "sse"} {
		t.Run(text, func(t *testing.T) {
			t.Parallel()
			s := DefaultSettings()
			s.ConnectTimeout, s.HealthInterval = 30*time.Second, 0
			cfg := hostileServer("plain", nil)
			if text == "sse" {
				cfg, text = hugeSSEServer(t), "huge"
			}
			p := newTestPool(t, Config{Servers: map[string]ServerConfig{"srv": cfg}},
				WithSettings(s), WithLogger(discardLogger()))
			before := statusOf(p, "srv")
			if before.State != StateReady {
				t.Fatalf("status %+v", before)
			}
			v := newTestView(t, p, nil, nil, nil)
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute) // 65 MiB through a pipe under -race and load
			defer cancel()
			// Another call in flight at the same time, as another job's
			// would be: its answer comes before or after the large one.
			other := make(chan error, 1)
			go func() {
				res, err := v.CallTool(ctx, "echo", json.RawMessage(`{"text":"other"}`))
				if err == nil && res.Text != "other" {
					err = errors.New("answered " + res.Text)
				}
				other <- err
			}()
			_, err := v.CallTool(ctx, "echo", json.RawMessage(`{"text":"`+text+`"}`))
			if err == nil || !strings.Contains(err.Error(), "larger than the client's bound of 64 MiB") || errors.Is(err, ErrSessionLost) {
				t.Fatalf("call: %v; want the bound named, the session kept", err)
			}
			if err := <-other; err != nil {
				t.Errorf("the other call: %v", err)
			}
			if res, err := v.CallTool(ctx, "echo", json.RawMessage(`{"text":"after"}`)); err != nil || res.Text != "after" {
				t.Errorf("the next call: %+v, %v", res, err)
			}
			if after := statusOf(p, "srv"); after.PID != before.PID || after.Connects != 1 || after.State != StateReady {
				t.Errorf("session replaced: before %+v, after %+v", before, after)
			}
		})
	}
}

// hugeSSEServer is an mcp-go server of the legacy SSE transport whose
// echo("huge") answers with a text over maxMessageBytes.
func hugeSSEServer(t *testing.T) ServerConfig {
	t.Helper()
	s := server.NewMCPServer("sse", "1", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewToolWithRawSchema("echo", "Echo the text back.", json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			text := req.GetString("text", "")
			if text == "huge" {
				text = strings.Repeat("x", maxMessageBytes+1<<20)
			}
			return mcp.NewToolResultText(text), nil
		})
	return ServerConfig{URL: serveSSE(t, s, nil), Type: TypeSSE}
}
