package toolcache

import (
	"strings"
	"testing"
)

// A server of the legacy SSE transport configured without "type": "sse"
// fails with mcp-go's "likely a legacy SSE server", which named no
// setting; the error now says which key to set, for which server, and
// setting it connects.
func TestLegacySSEServerErrorNamesTheTypeKey(t *testing.T) {
	t.Parallel()
	url := sseTestServer(t, nil) // mcp-go's SSE server, in process
	hint := `set "type": "sse" for server "legacy" in the MCP servers file`
	for _, tc := range []struct {
		name string
		typ  string
		err  string // "": ready
	}{
		{"type unset", "", hint},
		{"type http", TypeHTTP, hint},
		{"type sse", TypeSSE, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newTestPool(t, Config{Servers: map[string]ServerConfig{"legacy": {URL: url, Type: tc.typ}}})
			st := p.Status()
			if len(st) != 1 {
				t.Fatalf("status %+v", st)
			}
			if tc.err == "" {
				if st[0].State != StateReady {
					t.Errorf("not ready: %+v", st[0])
				}
				return
			}
			if st[0].State == StateReady || !strings.Contains(st[0].Error, "likely a legacy SSE server") ||
				!strings.Contains(st[0].Error, tc.err) {
				t.Errorf("state %s, error %q; want it to contain %q", st[0].State, st[0].Error, tc.err)
			}
		})
	}
}
