package clienttools

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func compileFile(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	path := filepath.Join("..", "..", "schemas", name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(name, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The messages the Go code sends are what the schemas describe.
func TestWireMatchesSchemas(t *testing.T) {
	t.Parallel()
	req := Request{V: 1, ID: "5f2b0c1e9a7d4c3b8e6f1a2b3c4d5e6f", JobID: "job-42", Tool: "read_file", Arguments: `{"path":"/a"}`, DeadlineMS: 1767225600000}
	req.Sign(testSecret)
	longKey := req
	longKey.IdempotencyKey = strings.Repeat("j", 25) + "/call_" + strings.Repeat("x", 600) + "/\u00e9 \n"
	ans := Answer{V: 1, ID: req.ID, Output: "hi", IsError: true}
	ans.Sign(testSecret)
	tests := []struct {
		schema string
		msg    any
		valid  bool
	}{
		{"client_request.schema.json", req, true},
		{"client_request.schema.json", Request{V: 2, ID: "x"}, false},
		// The key holds the model's call id as it wrote it: 632 characters,
		// a slash and a newline in one a scripted model sent end to end
		// (the schema's maxLength of 512 refused the worker's request).
		{"client_request.schema.json", longKey, true},
		{"client_response.schema.json", ans, true},
		{"client_response.schema.json", Answer{V: 1, ID: "x", Output: "o"}, false}, // no mac
	}
	for _, tt := range tests {
		s := compileFile(t, tt.schema)
		b, _ := json.Marshal(tt.msg)
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(v); (err == nil) != tt.valid {
			t.Errorf("%s: %s: valid=%v, err %v", tt.schema, b, tt.valid, err)
		}
	}
}
