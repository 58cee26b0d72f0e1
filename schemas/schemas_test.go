package schemas_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"

	"github.com/dop251/goja"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/jetagent/jetagent/schemas"
)

// ecmaRegexp is a JSON Schema pattern compiled as JavaScript does it
// (ECMA-262, the dialect JSON Schema 2020-12 names, with the "u" flag as
// Ajv, the usual JavaScript validator, compiles it), by goja.
type ecmaRegexp struct {
	mu   sync.Mutex
	src  string
	test func(string) bool
}

func (r *ecmaRegexp) MatchString(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.test(s)
}

func (r *ecmaRegexp) String() string { return r.src }

func compileECMA(src string) (jsonschema.Regexp, error) {
	vm := goja.New()
	if err := vm.Set("src", src); err != nil {
		return nil, err
	}
	fn, err := vm.RunString(`(function () { const re = new RegExp(src, "u"); return (s) => re.test(s); })()`)
	if err != nil {
		return nil, fmt.Errorf("not an ECMA-262 regular expression: %w", err)
	}
	r := &ecmaRegexp{src: src}
	if err := vm.ExportTo(fn, &r.test); err != nil {
		return nil, err
	}
	return r, nil
}

// compileAll compiles every schema of schemas.FS, with Go's regexp package
// (ecma false: what the worker uses) or with ECMA-262 regexps (what a
// JavaScript client's validator uses).
func compileAll(t *testing.T, ecma bool) (map[string]*jsonschema.Schema, error) {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if ecma {
		c.UseRegexpEngine(compileECMA)
	}
	files, err := fs.Glob(schemas.FS, "*.schema.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("schema files: %v %v", files, err)
	}
	for _, f := range files {
		b, err := fs.ReadFile(schemas.FS, f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := c.AddResource(schemas.Base+f, doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	out := map[string]*jsonschema.Schema{}
	var errs []string
	for _, f := range files {
		s, err := c.Compile(schemas.Base + f)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", f, err))
			continue
		}
		out[f] = s
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return out, nil
}

// TestSchemasWorkInJavaScript: the schemas are the wire contract an outside
// client reads, so each must compile, and judge, alike with Go's regexps
// and with ECMA-262's. job.schema.json used (?i:...) groups, which ECMA-262
// lacks: Ajv refused to compile the job and transcript schemas at all
// ("Invalid regular expression: /^(?i:role|...)$/u: Invalid group").
func TestSchemasWorkInJavaScript(t *testing.T) {
	t.Parallel()
	goSchemas, err := compileAll(t, false)
	if err != nil {
		t.Fatalf("with Go's regexp: %v", err)
	}
	jsSchemas, err := compileAll(t, true)
	if err != nil {
		t.Fatalf("with ECMA-262 regexps: %v", err)
	}

	// A history message (and a transcript's) may carry other keys, but none
	// that a case-insensitive decoder (Go's encoding/json among them, which
	// folds ſ to s) would read as a known one.
	msg := func(extra string) string {
		return `{"role":"user","content":"hi"` + extra + `}`
	}
	call := func(extra string) string {
		return `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"` + extra + `}}]}`
	}
	callItem := func(extra string) string {
		return `{"role":"assistant","tool_calls":[{"id":"c1","function":{"name":"f","arguments":"{}"}` + extra + `}]}`
	}
	cases := []struct {
		name    string
		message string
		valid   bool
	}{
		{"plain message", msg(``), true},
		{"unknown key", msg(`,"x_extra":1`), true},
		{"near key, not a case variant", msg(`,"roles":"user"`), true},
		{"Role", msg(`,"Role":"system"`), false},
		{"CONTENT", msg(`,"CONTENT":"x"`), false},
		{"Tool_Call_Id", msg(`,"Tool_Call_Id":"x"`), false},
		{"tool_callſ (long s folds to s)", msg(`,"tool_call\u017f":[]`), false},
		{"NaMe", msg(`,"NaMe":"x"`), false},
		{"tool call", call(``), true},
		{"function Arguments", call(`,"Arguments":"{}"`), false},
		{"function argumentſ", call(`,"argument\u017f":"{}"`), false},
		{"function NAME", call(`,"NAME":"g"`), false},
		{"function extra key", call(`,"strict":true`), true},
		{"call ID", callItem(`,"ID":"c2"`), false},
		{"call Type", callItem(`,"Type":"function"`), false},
		{"call Function", callItem(`,"Function":{}`), false},
		{"call extra key", callItem(`,"index":0`), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			docs := map[string]string{
				schemas.Job:        `{"task":"t","history":[` + tc.message + `]}`,
				schemas.Transcript: `{"job_id":"j","reflected":true,"messages":[` + tc.message + `]}`,
			}
			for file, doc := range docs {
				v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
				if err != nil {
					t.Fatalf("%s: %v", doc, err)
				}
				for engine, ss := range map[string]map[string]*jsonschema.Schema{"Go": goSchemas, "ECMA-262": jsSchemas} {
					err := ss[file].Validate(v)
					if (err == nil) != tc.valid {
						t.Errorf("%s with %s regexps: valid=%v, want %v (%v)", file, engine, err == nil, tc.valid, err)
					}
				}
			}
		})
	}
}
