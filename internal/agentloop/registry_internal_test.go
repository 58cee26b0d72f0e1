package agentloop

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jetagent/jetagent/internal/toolcache"
)

// TestSchemaRefsNeverReadTheWorkersFiles: a tool's schema comes from an MCP
// server or a job's client tool, so its "$ref" may point anywhere. Only
// references within the schema resolve; a file or remote reference makes
// the schema unenforced (the server judges the call), and is never read —
// a FIFO nobody writes to would block the call forever.
func TestSchemaRefsNeverReadTheWorkersFiles(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, ref   string
		compiles    bool
		refusesArgs string // arguments the compiled schema refuses
	}{
		{"local", "#/$defs/s", true, `{"p": 1}`},
		{"file URL", "file:///etc/hostname", false, ""},
		{"path", "/etc/hostname", false, ""},
		{"FIFO", "file://" + fifo, false, ""},
		{"http", "https://example.com/s.json", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			schema := `{"type": "object", "$defs": {"s": {"type": "string"}}, "properties": {"p": {"$ref": "` + tt.ref + `"}}}`
			e := &entry{tool: toolcache.Tool{Name: "t", InputSchema: json.RawMessage(schema)}}
			_, err := e.validator()
			if tt.compiles != (err == nil) {
				t.Fatalf("compile error %v, want compiles=%v", err, tt.compiles)
			}
			if tt.compiles {
				if got := e.validate(json.RawMessage(tt.refusesArgs)); len(got) == 0 {
					t.Errorf("%s accepted", tt.refusesArgs)
				}
				return
			}
			if got := e.validate(json.RawMessage(`{"p": 1}`)); got != nil {
				t.Errorf("unenforced schema refused a call: %v", got)
			}
			if strings.Contains(err.Error(), "invalid character") {
				t.Errorf("the reference was read: %v", err)
			}
		})
	}
}

// TestValidationWordsAreStable: the violations the model is shown are the
// same for the same call on every run (the schema library lists members an
// object may not have in map order).
func TestValidationWordsAreStable(t *testing.T) {
	t.Parallel()
	e := &entry{tool: toolcache.Tool{Name: "t", InputSchema: json.RawMessage(
		`{"type": "object", "properties": {"path": {"type": "string"}}, "additionalProperties": false}`)}}
	const want = "at '': additional properties 'a', 'b', 'c', 'd', 'pth' not allowed"
	for range 20 {
		got := e.validate(json.RawMessage(`{"pth": "x", "d": 1, "c": 1, "b": 1, "a": 1}`))
		if len(got) != 1 || got[0] != want {
			t.Fatalf("got %q, want [%q]", got, want)
		}
	}
}
