package toolcache

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseCatalog reads every form a captured catalog comes in, and
// refuses a file that holds no tools array with a clear error.
func TestParseCatalog(t *testing.T) {
	t.Parallel()
	const tool = `{"name": "read_file", "description": "Read a file.", "inputSchema": {"type": "object"}}`
	tests := []struct {
		name, data, server string
		tools              []string // Server/Name of each tool
		wantErr            string
	}{
		{"captured", `{"server": "fs", "tools": [` + tool + `]}`, "fs", []string{"fs/read_file"}, ""},
		{"aggregated", `{"server": "all", "tool_server": ["a", "b"], "tools": [` + tool + `, ` + tool + `]}`, "all", []string{"a/read_file", "b/read_file"}, ""},
		{"tools/list result", `{"tools": [` + tool + `]}`, "", []string{"/read_file"}, ""},
		{"JSON-RPC response", `{"jsonrpc": "2.0", "id": 1, "result": {"tools": [` + tool + `]}}`, "", []string{"/read_file"}, ""},
		{"array", "\n [" + tool + `]`, "", []string{"/read_file"}, ""},
		{"byte order mark", "\xef\xbb\xbf" + `{"server": "fs", "tools": [` + tool + "]}\r\n", "fs", []string{"fs/read_file"}, ""},
		{"byte order mark, array", "\xef\xbb\xbf[" + tool + "]", "", []string{"/read_file"}, ""},
		{"JSON-RPC error", `{"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}}`, "", nil,
			`a JSON-RPC error response (code -32601: "Method not found"), not a tools/list result`},
		{"empty tools", `{"server": "fs", "tools": []}`, "fs", nil, ""},
		{"no tools", `{"server": "fs"}`, "", nil, `no "tools" array`},
		{"not JSON", `{oops`, "", nil, "invalid character"},
		{"tool_server mismatch", `{"tool_server": ["a"], "tools": []}`, "", nil, "tool_server has 1 entries for 0 tools"},
		{"tool without a name", `{"tools": [{"description": "x"}]}`, "", nil, "tools[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			server, tools, err := ParseCatalog([]byte(tt.data))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tl := range tools {
				got = append(got, tl.Server+"/"+tl.Name)
			}
			if server != tt.server || strings.Join(got, ",") != strings.Join(tt.tools, ",") {
				t.Errorf("got %q %v, want %q %v", server, got, tt.server, tt.tools)
			}
		})
	}
}

// TestLoadCatalogAsServed: the definitions the pool would leave out of a
// tools/list are left out and reported, where LoadCatalog refuses the file;
// the same name on two servers of an aggregated catalog is kept.
func TestLoadCatalogAsServed(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "c.json")
	data := `{"tools": [{"name": "a", "description": "first"}, {"name": "a", "description": "second"},` +
		` {"name": "b", "inputSchema": []}, {"name": "a"}], "tool_server": ["s1", "s1", "s1", "s2"]}`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadCatalog(path); err == nil || !strings.Contains(err.Error(), `tools[2]: tool "b"`) {
		t.Fatalf("LoadCatalog: %v", err)
	}
	_, tools, skipped, err := LoadCatalogAsServed(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tl := range tools {
		got = append(got, tl.Server+"/"+tl.Name+":"+tl.Description)
	}
	if strings.Join(got, ",") != "s1/a:first,s2/a:" || len(skipped) != 2 ||
		!strings.Contains(skipped[0].Error(), `tools[1]: tool "a": its server gave that name before`) ||
		!strings.Contains(skipped[1].Error(), `tools[2]: tool "b"`) {
		t.Fatalf("tools %q, skipped %v", got, skipped)
	}
	if _, _, _, err := LoadCatalogAsServed(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Fatal("a missing file: no error")
	}
}
