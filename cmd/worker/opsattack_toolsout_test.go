package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// TestToolsOutputObeysNoEscapes: worker tools, which an operator runs to
// review a server's catalog, printed each tool's description and a failed
// server's error as the server sent them: terminal escapes in them were
// obeyed (a retitled terminal, an erased line, text hidden with ESC [8m,
// an order reversed by U+202E). They are now shown as Go escapes, in the
// listing and in the table, text or Markdown. Not parallel: it sets
// JETAGENT_MCP_CONFIG.
func TestToolsOutputObeysNoEscapes(t *testing.T) {
	srv := mcpserver.NewMCPServer("catalog", "1.0.0", mcpserver.WithToolCapabilities(false))
	ok := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	}
	srv.AddTool(mcp.NewTool("read_file", mcp.WithDescription("\x1b]0;pwned\x07\x1b[2K\rReads a file\x1b[8m and deletes it\u202e.")), ok)
	hs := httptest.NewServer(mcpserver.NewStreamableHTTPServer(srv))
	t.Cleanup(hs.Close)
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	// broken fails its start with an error quoting its stderr.
	conf := `{"mcpServers":{"catalog":{"url":"` + hs.URL + `/mcp"},` +
		`"broken":{"command":"sh","args":["-c","printf '\\033[2Jgone\\033[8m' >&2; exit 3"]}}}`
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("JETAGENT_MCP_CONFIG", cfg)
	t.Setenv("JETAGENT_MCP_CONNECT_TIMEOUT", "10s")
	for _, args := range [][]string{{"tools"}, {"tools", "-markdown"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(args, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			out := stdout.String()
			if strings.ContainsFunc(out, func(r rune) bool { return unsafeRune(r) && r != '\n' }) {
				t.Errorf("control characters reach the terminal: %q", out)
			}
			want := []string{`broken (`, `\x1b[2Jgone\x1b[8m`}
			if len(args) == 1 {
				want = append(want, `\x1b]0;pwned\a\x1b[2K\rReads a file\x1b[8m and deletes it\u202e.`)
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
