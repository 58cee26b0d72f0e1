package toolcache

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// TestRetryAfterHonoured: a server (or the proxy before it) that refuses a
// call with 503 or 429 and a Retry-After has not run it; the call is sent
// again once that time has passed, as long as the call's deadline leaves
// room, and otherwise fails saying what the server asked.
func TestRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		status      int
		retryAfter  string
		refusals    int64         // tools/call requests refused before one goes through
		callTimeout time.Duration // 0: none
		wantErr     string        // "": the call succeeds
		wantCalls   int64         // tools/call requests the server saw
	}{
		{name: "503 twice", status: http.StatusServiceUnavailable, retryAfter: "1", refusals: 2, wantCalls: 3},
		{name: "429 once", status: http.StatusTooManyRequests, retryAfter: "0", refusals: 1, wantCalls: 2},
		{name: "http date", status: http.StatusServiceUnavailable, retryAfter: time.Now().Add(-time.Minute).UTC().Format(http.TimeFormat), refusals: 1, wantCalls: 2},
		{name: "always refused", status: http.StatusServiceUnavailable, retryAfter: "0", refusals: 100,
			wantErr: "the server asked to retry after 0s; not retried: sent 3 times", wantCalls: 3},
		{name: "too long", status: http.StatusServiceUnavailable, retryAfter: "3600", refusals: 1,
			wantErr: "status 503: busy (the server asked to retry after 1h0m0s; not retried: longer than the 30s waited for)", wantCalls: 1},
		{name: "beyond the call timeout", status: http.StatusTooManyRequests, retryAfter: "20", refusals: 1, callTimeout: 5 * time.Second,
			wantErr: "not retried: beyond the call's deadline", wantCalls: 1},
		// A 500 may have run the call: never sent again.
		{name: "500", status: http.StatusInternalServerError, retryAfter: "0", refusals: 1, wantErr: "status 500", wantCalls: 1},
		{name: "503 without Retry-After", status: http.StatusServiceUnavailable, refusals: 1, wantErr: "status 503: busy", wantCalls: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls, refused atomic.Int64
			s := server.NewMCPServer("retry", "1")
			s.AddTool(mcp.NewTool("echo", mcp.WithString("text")), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(req.GetString("text", "")), nil
			})
			mcpHandler := server.NewStreamableHTTPServer(s)
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				var msg struct{ Method string }
				_ = json.Unmarshal(body, &msg)
				if msg.Method == string(mcp.MethodToolsCall) {
					calls.Add(1)
					if refused.Add(1) <= tc.refusals {
						if tc.retryAfter != "" {
							w.Header().Set("Retry-After", tc.retryAfter)
						}
						http.Error(w, "busy", tc.status)
						return
					}
				}
				mcpHandler.ServeHTTP(w, r)
			}))
			t.Cleanup(func() {
				ts.CloseClientConnections()
				ts.Close()
			})
			p := newTestPool(t, Config{Servers: map[string]ServerConfig{"web": {URL: ts.URL + "/mcp", CallTimeout: Duration(tc.callTimeout)}}})
			v := newTestView(t, p, nil, nil, nil)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			start := time.Now()
			res, err := v.CallTool(ctx, "echo", json.RawMessage(`{"text":"hi"}`))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("call: %v", err)
			case tc.wantErr == "" && res.Text != "hi":
				t.Fatalf("result %q", res.Text)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
			}
			if tc.wantErr != "" && errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v: ended by the deadline, not at once", err)
			}
			if tc.wantErr != "" && time.Since(start) > 10*time.Second {
				t.Errorf("the refusal took %s to come back", time.Since(start))
			}
			if got := calls.Load(); got != tc.wantCalls {
				t.Errorf("the server saw %d tools/call requests, want %d", got, tc.wantCalls)
			}
		})
	}
}
