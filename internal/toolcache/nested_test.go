package toolcache

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// handMCPServer is an HTTP MCP server written by hand, so that it can send
// what mcp-go's server would refuse to marshal: it answers echo(text) with
// text, and echo("deep") with a structuredContent nested deeper than
// maxJSONNesting. sse serves the legacy SSE transport (answers on the GET
// stream); otherwise Streamable HTTP, each answer an event stream.
func handMCPServer(t *testing.T, sse bool) string {
	t.Helper()
	answer := func(id json.RawMessage, method, text string) string {
		switch method {
		case "initialize":
			return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"protocolVersion":"2025-11-25","serverInfo":{"name":"hand","version":"0"},"capabilities":{"tools":{}}}}`
		case "tools/list":
			return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}}`
		case "tools/call":
			if text == "deep" {
				return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[],"structuredContent":` + string(deepSchema(maxJSONNesting/2)) + `}}`
			}
			b, _ := json.Marshal(text)
			return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{"content":[{"type":"text","text":` + string(b) + `}]}}`
		}
		return `{"jsonrpc":"2.0","id":` + string(id) + `,"result":{}}`
	}
	stream := make(chan string, 100) // the legacy SSE stream's answers
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sse && r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			fmt.Fprint(w, "event: endpoint\ndata: /message\n\n")
			w.(http.Flusher).Flush()
			for {
				select {
				case m := <-stream:
					fmt.Fprintf(w, "event: message\ndata: %s\n\n", m)
					w.(http.Flusher).Flush()
				case <-r.Context().Done():
					return
				}
			}
		}
		if r.Method != http.MethodPost {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct{ Text string } `json:"arguments"`
			} `json:"params"`
		}
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &req) != nil || len(req.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		a := answer(req.ID, req.Method, req.Params.Arguments.Text)
		if sse {
			stream <- a
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", a)
	}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	if sse {
		return ts.URL + "/sse"
	}
	return ts.URL + "/mcp"
}

// An event nested deeper than encoding/json decodes was dropped by mcp-go
// without a word: over legacy SSE the call waited for its deadline, over
// Streamable HTTP it failed with "unexpected nil response". It fails at
// once saying why, and the session goes on.
func TestNestedTooDeepOverHTTP(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		typ  string
	}{
		{"http", TypeHTTP},
		{"sse", TypeSSE},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := DefaultSettings()
			s.HealthInterval = 0
			p := newTestPool(t, Config{Servers: map[string]ServerConfig{"hand": {URL: handMCPServer(t, tc.typ == TypeSSE), Type: tc.typ}}}, WithSettings(s), WithLogger(slog.New(slog.DiscardHandler)))
			v := newTestView(t, p, nil, nil, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := v.CallTool(ctx, "echo", json.RawMessage(`{"text":"deep"}`)); err == nil || !strings.Contains(err.Error(), "levels deep") {
				t.Errorf("an answer nested too deep: %v, want the nesting bound", err)
			}
			if res := call(t, v, "echo", map[string]any{"text": "still here"}); res.Text != "still here" {
				t.Errorf("echo = %q", res.Text)
			}
		})
	}
}
