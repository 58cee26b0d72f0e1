package clienttools

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jetagent/jetagent/internal/toolcache"
)

func TestValidateDecls(t *testing.T) {
	t.Parallel()
	obj := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)
	// A FIFO nobody writes to: reading it would block the worker forever.
	fifo := filepath.Join(t.TempDir(), "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ref := func(to string) []Decl {
		return []Decl{{Name: "a", InputSchema: json.RawMessage(`{"type":"object","properties":{"p":{"$ref":"` + to + `"}}}`)}}
	}
	many := make([]Decl, 65)
	for i := range many {
		many[i] = Decl{Name: fmt.Sprint("t", i), InputSchema: obj}
	}
	tests := []struct {
		name  string
		decls []Decl
		lim   DeclLimits
		want  string // "" means valid
	}{
		{"valid", []Decl{{Name: "read_local", Description: "reads", InputSchema: obj}}, DeclLimits{}, ""},
		{"draft-07 schema", []Decl{{Name: "x", InputSchema: json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`)}}, DeclLimits{}, ""},
		{"none", nil, DeclLimits{}, ""},
		{"bad name", []Decl{{Name: "a.b", InputSchema: obj}}, DeclLimits{}, "does not match"},
		{"empty name", []Decl{{InputSchema: obj}}, DeclLimits{}, "does not match"},
		{"duplicate", []Decl{{Name: "a", InputSchema: obj}, {Name: "a", InputSchema: obj}}, DeclLimits{}, "declared twice"},
		{"schema not an object", []Decl{{Name: "a", InputSchema: json.RawMessage(`[]`)}}, DeclLimits{}, "not a JSON object"},
		{"schema missing", []Decl{{Name: "a"}}, DeclLimits{}, "not a JSON object"},
		{"schema invalid", []Decl{{Name: "a", InputSchema: json.RawMessage(`{"type":"nope"}`)}}, DeclLimits{}, "input_schema"},
		// Arguments are one JSON object: a provider refuses another type.
		{"type string", []Decl{{Name: "a", InputSchema: json.RawMessage(`{"type":"string"}`)}}, DeclLimits{}, `input_schema: its type is "string", not "object"`},
		{"type array", []Decl{{Name: "a", InputSchema: json.RawMessage(`{"type":"array","items":{}}`)}}, DeclLimits{}, `its type is "array"`},
		{"type list", []Decl{{Name: "a", InputSchema: json.RawMessage(`{"type":["object","null"]}`)}}, DeclLimits{}, `its type is ["object","null"]`},
		{"no type", []Decl{{Name: "a", InputSchema: json.RawMessage(`{"properties":{"p":{"type":"string"}}}`)}}, DeclLimits{}, ""},
		{"Type is no keyword", []Decl{{Name: "a", InputSchema: json.RawMessage(`{"type":"object","Type":"string"}`)}}, DeclLimits{}, ""},
		{"local $ref", []Decl{{Name: "a", InputSchema: json.RawMessage(`{"type":"object","$defs":{"s":{"type":"string"}},"properties":{"p":{"$ref":"#/$defs/s"}}}`)}}, DeclLimits{}, ""},
		// The worker's own files are never read for a job's schema.
		{"$ref to a file URL", ref("file:///etc/hostname"), DeclLimits{}, "input_schema"},
		{"$ref to a path", ref("/etc/hostname"), DeclLimits{}, "input_schema"},
		{"$ref to a FIFO", ref("file://" + fifo), DeclLimits{}, "input_schema"},
		{"$ref to http", ref("https://example.com/s.json"), DeclLimits{}, "input_schema"},
		{"too many", many, DeclLimits{}, "at most 64"},
		{"one too big", []Decl{{Name: "a", Description: strings.Repeat("d", 200), InputSchema: obj}}, DeclLimits{MaxDeclBytes: 100}, "at most 100"},
		{"all too big", []Decl{{Name: "a", InputSchema: obj}, {Name: "b", InputSchema: obj}}, DeclLimits{MaxBytes: 150}, "at most 150"},
		// Compiling a deeply nested schema costs time about cubic in its
		// depth: 2,000 levels in 20 KB kept a core busy for minutes.
		{"nested too deep", []Decl{{Name: "a", InputSchema: nested(150)}}, DeclLimits{}, "nests more than 100 levels"},
		{"nested deep enough", []Decl{{Name: "a", InputSchema: nested(90)}}, DeclLimits{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := ValidateDecls(tt.decls, tt.lim)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !errors.Is(err, ErrInvalidDecl) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want ErrInvalidDecl mentioning %q", err, tt.want)
			}
		})
	}
}

// nested is an object schema whose property nests depth levels of items.
func nested(depth int) json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"p":` + strings.Repeat(`{"items":`, depth) + `{}` + strings.Repeat(`}`, depth) + `}}`)
}

// TestOversizedDeclNotCompiled: a declaration over its size limit is
// refused for its size alone; its schema is not compiled (which, nested
// deep, could cost minutes before the size refusal was returned).
func TestOversizedDeclNotCompiled(t *testing.T) {
	t.Parallel()
	err := ValidateDecls([]Decl{{Name: "a", InputSchema: json.RawMessage(`{"type":"nope","description":"` + strings.Repeat("d", 200) + `"}`)}}, DeclLimits{MaxDeclBytes: 100})
	if err == nil || !strings.Contains(err.Error(), "at most 100") || strings.Contains(err.Error(), "input_schema") {
		t.Fatalf("got %v, want the size refusal alone", err)
	}
}

// TestInvalidSchemaMessageIsStable: a schema failing the metaschema at
// several properties gets the same message each time (the library lists
// an object's causes in map order).
func TestInvalidSchemaMessageIsStable(t *testing.T) {
	t.Parallel()
	decls := []Decl{{Name: "a", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"a":{"type":5},"b":{"minLength":"x"},"c":{"type":"nope"},"d":{"required":1}}}`)}}
	first := fmt.Sprint(ValidateDecls(decls, DeclLimits{}))
	if !strings.Contains(first, "/properties/a") || !strings.Contains(first, "/properties/d") {
		t.Fatalf("message %q does not name the failing properties", first)
	}
	if a, d := strings.Index(first, "/properties/a"), strings.Index(first, "/properties/d"); a > d {
		t.Errorf("causes not in order:\n%s", first)
	}
	for range 20 {
		if got := fmt.Sprint(ValidateDecls(decls, DeclLimits{})); got != first {
			t.Fatalf("message varies:\n%s\nthen\n%s", first, got)
		}
	}
}

func TestMerge(t *testing.T) {
	t.Parallel()
	srv := []toolcache.Tool{
		{Name: "read_file", Original: "read_file", Server: "fs", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "search", Original: "search", Server: "web"},
	}
	client := []Decl{
		{Name: "read_file", Description: "shadow attempt", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Name: "local_notes", Description: "notes", InputSchema: json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","properties":{"q":{"type":"string"}}}`)},
		{Name: "local_notes", Description: "twice"},
		{Name: "no_schema"},
	}
	merged, clashes := Merge(srv, client)
	var names []string
	for _, m := range merged {
		names = append(names, m.Name+"@"+m.Server)
	}
	if got, want := strings.Join(names, " "), "read_file@fs search@web local_notes@ no_schema@"; got != want {
		t.Errorf("merged %s, want %s", got, want)
	}
	if got := strings.Join(clashes, " "); got != "read_file local_notes" {
		t.Errorf("clashes %q", got)
	}
	if merged[0].Description != "" {
		t.Errorf("server tool was changed: %+v", merged[0])
	}
	if got := string(merged[2].Parameters); got != `{"type":"object","properties":{"q":{"type":"string"}}}` {
		t.Errorf("parameters %s", got)
	}
	if got := string(merged[3].InputSchema) + " " + string(merged[3].Parameters); got != `{"type":"object"} {"type":"object"}` {
		t.Errorf("no_schema: %s", got)
	}
	if merged[2].Original != "local_notes" || merged[2].Description != "notes" {
		t.Errorf("client tool %+v", merged[2])
	}
	if len(srv) != 2 || srv[0].Server != "fs" {
		t.Error("Merge modified its input")
	}
}
