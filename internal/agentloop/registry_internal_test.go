package agentloop

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

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

// TestSchemaLibraryPanicIsACompileError: the validator compiles under a
// sync.Once. A panic of the schema library there failed the job whose
// call compiled it and left the Once done with neither schema nor error:
// every later job's calls of the tool ran unchecked, no error recorded.
// The panic is a compile error instead, the same for every call: the
// schema is recorded as not compiling and not enforced, as any schema
// that does not compile (TestSchemaRefsNeverReadTheWorkersFiles). The
// outputSchema's compile is guarded the same way.
func TestSchemaLibraryPanicIsACompileError(t *testing.T) {
	t.Parallel()
	var compiles int
	e := &entry{
		tool: toolcache.Tool{Name: "t",
			InputSchema:  json.RawMessage(`{"type": "object", "properties": {"p": {"type": "string"}}}`),
			OutputSchema: json.RawMessage(`{"type": "object"}`)},
		compile: func(string, json.RawMessage) (*jsonschema.Schema, error) {
			compiles++
			panic("index out of range in the schema library")
		},
	}
	for i := range 3 {
		_, err := e.validator()
		if err == nil || !strings.Contains(err.Error(), "the schema library failed compiling it") ||
			!strings.Contains(err.Error(), "index out of range in the schema library") {
			t.Fatalf("call %d: compile error %v, want the library's panic as the error", i, err)
		}
		if got := e.validate(json.RawMessage(`{"p": 1}`)); got != nil {
			t.Errorf("call %d: a schema that did not compile refused a call: %v", i, got)
		}
	}
	r := toolcache.Result{Text: "x", Structured: json.RawMessage(`[1]`)}
	for range 2 {
		if got := e.checkOutput(r); got.IsError || got.Text != "x" {
			t.Errorf("an outputSchema that did not compile changed the result: %+v", got)
		}
	}
	if compiles != 2 { // once the input schema (Parameters is empty), once the output schema
		t.Errorf("compiled %d times, want 2 (once each)", compiles)
	}
}
