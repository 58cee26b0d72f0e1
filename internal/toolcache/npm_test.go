package toolcache

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// npmConfig configures the three npm reference servers over stdio.
func npmConfig(t *testing.T) Config {
	t.Helper()
	dir := t.TempDir()
	return Config{Servers: map[string]ServerConfig{
		"everything": {Command: npmBin(t, "mcp-server-everything"), Args: []string{"stdio"}},
		"filesystem": {Command: npmBin(t, "mcp-server-filesystem"), Args: []string{dir}},
		"memory":     {Command: npmBin(t, "mcp-server-memory"), Env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, "memory.jsonl")}},
	}}
}

// The npm reference servers (2026.8.31) connect over stdio on the
// initialize handshake (protocol 2025-11-25), list the tools their captured
// catalogs list, and answer calls.
func TestNPMReferenceServers(t *testing.T) {
	t.Parallel()
	cfg := npmConfig(t)
	p := newTestPool(t, cfg)
	for _, st := range p.Status() {
		if st.State != StateReady {
			t.Fatalf("%s: %+v", st.Name, st)
		}
		if st.Protocol != "2025-11-25" {
			t.Errorf("%s: protocol %q", st.Name, st.Protocol)
		}
		t.Logf("%s: %s %s, %d tools, connected in %v", st.Name, st.ServerName, st.ServerVer, st.Tools, st.ConnectTime)
	}
	// Every listed tool is in the captured catalog, with its schema verbatim.
	for _, name := range []string{"everything", "filesystem", "memory"} {
		_, catalog, err := LoadCatalog(filepath.Join(moduleRoot(t), "..", "shared", "catalogs", "modelcontextprotocol-server-"+name+".json"))
		if err != nil {
			t.Skipf("catalogs not available: %v", err)
		}
		want := map[string]Tool{}
		for _, tool := range catalog {
			want[tool.Original] = tool
		}
		n := 0
		for _, tool := range p.Registry().List() {
			if tool.Server != name {
				continue
			}
			n++
			c, ok := want[tool.Original]
			if !ok {
				t.Errorf("%s: tool %s not in the catalog", name, tool.Original)
				continue
			}
			if string(c.InputSchema) != string(tool.InputSchema) {
				t.Errorf("%s: %s: schema differs from the catalog:\n%s\n%s", name, tool.Original, tool.InputSchema, c.InputSchema)
			}
		}
		// everything lists its sampling/elicitation/roots tools only to
		// clients that declare those capabilities; the pool declares none,
		// and leaves out simulate-research-query, which runs only as a task.
		if min := len(catalog) - 4; n < min || n > len(catalog) {
			t.Errorf("%s: %d tools, catalog has %d", name, n, len(catalog))
		}
	}

	if p.Registry().Has("simulate-research-query") {
		t.Error("simulate-research-query (taskSupport required) is listed: every call of it fails")
	}

	v := newTestView(t, p, nil, nil, nil)
	if got := call(t, v, "echo", map[string]any{"message": "hi"}).Text; !strings.Contains(got, "hi") {
		t.Errorf("everything echo = %q", got)
	}
	if got := call(t, v, "get-sum", map[string]any{"a": 2, "b": 3}).Text; !strings.Contains(got, "5") {
		t.Errorf("get-sum = %q", got)
	}
	if res := call(t, v, "get-structured-content", map[string]any{"location": "New York"}); len(res.Structured) == 0 {
		t.Errorf("get-structured-content: no structured content: %+v", res)
	}
	dir := cfg.Servers["filesystem"].Args[0]
	file := filepath.Join(dir, "note.txt")
	call(t, v, "write_file", map[string]any{"path": file, "content": "pooled"})
	if got := call(t, v, "read_text_file", map[string]any{"path": file}).Text; got != "pooled" {
		t.Errorf("read_text_file = %q", got)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "pooled" {
		t.Errorf("file on disk = %q, %v", b, err)
	}
	call(t, v, "create_entities", map[string]any{"entities": []map[string]any{{"name": "jetagent", "entityType": "project", "observations": []string{"pools MCP sessions"}}}})
	if got := call(t, v, "read_graph", nil).Text; !strings.Contains(got, "pools MCP sessions") {
		t.Errorf("read_graph = %q", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := v.ListResources(ctx)
	if err != nil || len(rs) == 0 {
		t.Fatalf("ListResources = %d, %v", len(rs), err)
	}
	for _, r := range rs {
		if r.URI == "" {
			continue
		}
		text, err := v.ReadResource(ctx, r.URI)
		if err != nil || text == "" {
			t.Errorf("ReadResource(%s) = %q, %v", r.URI, text, err)
		}
		break
	}
}
