package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestToolsFailedServerTableReadable: worker tools put a failed server's
// whole error (its stderr included) in the table's catalog column, so the
// text table padded every row to the error's width, some 200 columns with
// README's mcp.json on a machine without /srv/data, while the listing said
// only "files: failed, 0 tools". The listing now gives the error and the
// text table the state. Not parallel: it sets JETAGENT_MCP_CONFIG.
func TestToolsFailedServerTableReadable(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	conf := `{"mcpServers":{"broken":{"command":"sh","args":["-c","echo 'Error: None of the specified directories are accessible, not even /srv/data' >&2; exit 3"]}}}`
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("JETAGENT_MCP_CONFIG", cfg)
	t.Setenv("JETAGENT_MCP_CONNECT_TIMEOUT", "10s")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"tools"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "broken: failed, 0 tools: ") || !strings.Contains(lines[0], "not even /srv/data") {
		t.Errorf("the listing does not say why broken failed: %q", lines[0])
	}
	var table []string
	for i, l := range lines {
		if strings.Contains(l, "catalog") && strings.Contains(l, "deferred/full") {
			table = lines[i:]
		}
	}
	if len(table) < 2 || !strings.Contains(table[1], "broken (failed)") {
		t.Fatalf("no table row for broken (failed):\n%s", out)
	}
	for _, l := range table {
		if len(l) > 100 {
			t.Errorf("table line of %d columns: %q", len(l), l)
		}
	}
}
