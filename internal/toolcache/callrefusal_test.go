package toolcache

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/server"
)

// A Streamable HTTP server that starts refusing a session's calls (a
// token that expired mid-job, a key revoked) was reported as mcp-go put
// it, "transport error: authorization required" for a 401, without what
// the server said or where the credentials are set. The call's error now
// quotes the server's answer and points at the server's credentials.
func TestCallRefusalSaysWhy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code int
		body string
		want string
	}{
		{401, "invalid_token: the token expired", `(the server answered 401 Unauthorized: "invalid_token: the token expired"): check the credentials set for server "s"`},
		{403, "key revoked", `(the server answered 403 Forbidden: "key revoked"): check the credentials set for server "s"`},
	} {
		t.Run(http.StatusText(tc.code), func(t *testing.T) {
			t.Parallel()
			var refuse atomic.Bool
			h := server.NewStreamableHTTPServer(newTestMCPServer("http"), server.WithStateful(true))
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost && refuse.Load() {
					b, _ := io.ReadAll(r.Body)
					if bytes.Contains(b, []byte(`"tools/call"`)) {
						http.Error(w, tc.body, tc.code)
						return
					}
					r.Body = io.NopCloser(bytes.NewReader(b))
				}
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
			p := newTestPool(t, Config{Servers: map[string]ServerConfig{"s": {URL: ts.URL + "/mcp"}}})
			v := newTestView(t, p, nil, nil, nil)
			call(t, v, "echo", map[string]any{"text": "a"})
			refuse.Store(true)
			_, err := v.CallTool(t.Context(), "echo", []byte(`{"text":"b"}`))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}
