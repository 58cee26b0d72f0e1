package agentrun_test

import (
	"errors"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/agentrun"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// FuzzAdmit runs the whole door of the worker command on any body: the
// decoder, then Admit (client tool declarations: names, sizes, reserved
// names, schemas compiled by jsonschema). Neither panics; Admit refuses
// only with ErrInvalidDecl; and a job it admits does not fail later for
// its declarations: each one's schema normalises for the provider, as the
// loop does when it offers the tool, and none takes a built-in name.
func FuzzAdmit(f *testing.F) {
	const secret = `"client_secret":"0123456789abcdef0123456789abcdef"`
	for _, s := range []string{
		`{"task":"x"}`,
		`{"task":"x","client_tools":[{"name":"ask","input_schema":{"type":"object","properties":{"q":{"type":"string"}}}}],` + secret + `}`,
		`{"task":"x","client_tools":[{"name":"a","input_schema":{}},{"name":"a","input_schema":{}}],` + secret + `}`,
		`{"task":"x","client_tools":[{"name":"call_tool","input_schema":{}}],` + secret + `}`,
		`{"task":"x","client_tools":[{"name":"mcp_read_resource","input_schema":{}}],` + secret + `}`,
		`{"task":"x","client_tools":[{"name":"a","input_schema":{"type":"nope"}}],` + secret + `}`,
		`{"task":"x","client_tools":[{"name":"a","input_schema":{"$ref":"https://example.com/s.json"}}],` + secret + `}`,
		`{"task":"x","client_tools":[{"name":"a","input_schema":{"$ref":"#"}}],` + secret + `}`,
		`{"task":"x","client_tools":[{"name":"a","input_schema":{"$defs":{"n":{"$ref":"#/$defs/n"}},"$ref":"#/$defs/n"}}],` + secret + `}`,
		`{"task":"x","client_tools":[{"name":"a","input_schema":{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"x":{"type":"integer","minimum":1,"exclusiveMinimum":true}}}}],` + secret + `}`,
		`{"task":"x","client_tools":[{"name":"a","input_schema":{"properties":{"s":{"pattern":"(?<=a)b"}}}}],` + secret + `}`,
	} {
		f.Add([]byte(s))
	}
	v, err := jobs.NewValidator(64 << 10)
	if err != nil {
		f.Fatal(err)
	}
	reserved := map[string]bool{}
	for _, n := range agentloop.BuiltinTools() {
		reserved[n] = true
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := v.DecodeJob(data)
		if err != nil {
			return // FuzzDecodeJob (internal/jobs) covers the decoder
		}
		if err := agentrun.Admit(j); err != nil {
			if !errors.Is(err, clienttools.ErrInvalidDecl) {
				t.Fatalf("Admit refused %s with %v, not ErrInvalidDecl", data, err)
			}
			return
		}
		for _, d := range j.ClientTools {
			if reserved[d.Name] {
				t.Fatalf("admitted a client tool named like the built-in %q", d.Name)
			}
			if _, err := toolcache.NormalizeSchema(d.InputSchema); err != nil {
				t.Fatalf("admitted client tool %q, whose schema the loop cannot offer: %v\n%s", d.Name, err, d.InputSchema)
			}
		}
		merged, _ := clienttools.Merge(nil, j.ClientTools)
		if len(merged) != len(j.ClientTools) {
			t.Fatalf("merged %d of %d admitted client tools", len(merged), len(j.ClientTools))
		}
	})
}
