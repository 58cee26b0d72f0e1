package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocalMCPWithJobClientTools: a --job file with client_tools (and the
// client_secret the schema then requires) beside --local-mcp had its secret
// replaced, so the file's own tools went to the local servers ("unknown
// tool") and the service holding the file's secret could not answer them.
// The combination is refused before anything is started.
func TestLocalMCPWithJobClientTools(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tt := range []struct{ name, job string }{
		{"client tools", `{"task":"t","client_secret":"` + strings.Repeat("s", 43) +
			`","client_tools":[{"name":"mytool","input_schema":{"type":"object"}}]}`},
		{"a secret", `{"task":"t","client_secret":"` + strings.Repeat("s", 43) + `"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".json")
			if err := os.WriteFile(p, []byte(tt.job), 0o600); err != nil {
				t.Fatal(err)
			}
			res := runQuiet("--job", p, "--local-mcp", filepath.Join(dir, "never-read.json"))
			if res.code != exitUsage || !strings.Contains(res.stderr, "has client_tools or a client_secret of its own") {
				t.Errorf("%+v", res)
			}
		})
	}
}
