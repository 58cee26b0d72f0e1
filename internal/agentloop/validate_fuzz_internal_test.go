package agentloop

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/toolcache"
)

// The schema-validation wrapper (registry.go: entry.validator and
// entry.validate) stands between every model-written call and its tool. It
// compiles schemas that servers and submitters wrote and checks arguments a
// model wrote; neither may make it panic, and it must not refuse a call
// that matches its schema.

// schemaSource turns fuzz input into choices; exhausted input reads as zeros.
type schemaSource struct{ b []byte }

func (s *schemaSource) pick(n int) int {
	if len(s.b) == 0 {
		return 0
	}
	c := s.b[0]
	s.b = s.b[1:]
	return int(c) % n
}

// genNode is a generated schema with an instance it accepts and, when one
// exists, an instance it refuses.
type genNode struct {
	schema  map[string]any
	valid   any
	invalid any
	hasBad  bool
}

var genStrings = []string{"", "a", "héllo", "x y", "0", "\u0000", "日本", `"q"`}

// genSchema builds a schema of the keywords tool schemas use (type, enum,
// const, bounds, items, properties, required, additionalProperties) with a
// value that matches it by construction.
func genSchema(s *schemaSource, depth int) genNode {
	kinds := 8
	if depth >= 3 {
		kinds = 5 // leaves only
	}
	switch s.pick(kinds) {
	case 0:
		str := genStrings[s.pick(len(genStrings))]
		n := len([]rune(str))
		sch := map[string]any{"type": "string"}
		if s.pick(2) == 0 {
			sch["minLength"] = n
		}
		if s.pick(2) == 0 {
			sch["maxLength"] = n + s.pick(3)
		}
		return genNode{schema: sch, valid: str, invalid: 7, hasBad: true}
	case 1:
		lo := s.pick(10) - 5
		v := lo + s.pick(5)
		return genNode{schema: map[string]any{"type": "integer", "minimum": lo, "maximum": v + s.pick(3)},
			valid: v, invalid: float64(v) + 0.5, hasBad: true}
	case 2:
		v := float64(s.pick(100)) / 8
		return genNode{schema: map[string]any{"type": "number", "exclusiveMinimum": v - 1}, valid: v, invalid: v - 1, hasBad: true}
	case 3:
		return genNode{schema: map[string]any{"type": "boolean"}, valid: s.pick(2) == 0, invalid: "true", hasBad: true}
	case 4:
		opts := []any{"red", "green", 3, nil}
		v := opts[s.pick(len(opts))]
		if s.pick(2) == 0 {
			return genNode{schema: map[string]any{"const": v}, valid: v, invalid: "blue", hasBad: true}
		}
		return genNode{schema: map[string]any{"enum": opts}, valid: v, invalid: "blue", hasBad: true}
	case 5:
		item := genSchema(s, depth+1)
		n := s.pick(3)
		arr := make([]any, n)
		for i := range arr {
			arr[i] = item.valid
		}
		sch := map[string]any{"type": "array", "items": item.schema}
		if s.pick(2) == 0 {
			sch["minItems"] = n
		}
		if item.hasBad {
			return genNode{schema: sch, valid: arr, invalid: append(append([]any{}, arr...), item.invalid), hasBad: true}
		}
		return genNode{schema: sch, valid: arr, invalid: "not an array", hasBad: true}
	case 6:
		return genNode{schema: map[string]any{"type": []any{"string", "null"}}, valid: nil, invalid: 1, hasBad: true}
	default:
		return genObject(s, depth+1)
	}
}

// genObject is an object schema; its refused instance breaks one property
// (a wrong value, a missing required one or an extra one where none is allowed).
func genObject(s *schemaSource, depth int) genNode {
	props := map[string]any{}
	valid := map[string]any{}
	var required []string
	var bad []func() map[string]any
	for i := range s.pick(4) {
		name := fmt.Sprintf("p%d", i)
		if s.pick(5) == 0 {
			name = "päth-" + name // keys need not be identifiers
		}
		n := genSchema(s, depth)
		props[name] = n.schema
		if s.pick(2) == 0 {
			required = append(required, name)
			bad = append(bad, func() map[string]any {
				inst := clone(valid)
				delete(inst, name)
				return inst
			})
		}
		if s.pick(4) > 0 || contains(required, name) {
			valid[name] = n.valid
		}
		if n.hasBad {
			bad = append(bad, func() map[string]any {
				inst := clone(valid)
				inst[name] = n.invalid
				return inst
			})
		}
	}
	sch := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		sch["required"] = required
	}
	if s.pick(2) == 0 {
		sch["additionalProperties"] = false
		bad = append(bad, func() map[string]any {
			inst := clone(valid)
			inst["unexpected"] = 1
			return inst
		})
	}
	g := genNode{schema: sch, valid: valid, invalid: []any{}, hasBad: true}
	if len(bad) > 0 {
		g.invalid = bad[s.pick(len(bad))]()
	}
	return g
}

func clone(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func mustMarshal(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func toolEntry(name string, schema json.RawMessage) *entry {
	params, err := toolcache.NormalizeSchema(schema)
	if err != nil {
		params = nil
	}
	return &entry{tool: toolcache.Tool{Name: name, Original: name, InputSchema: schema, Parameters: params}, kind: kindMCP}
}

// FuzzValidateArguments: any schema (compiled or not) and any arguments:
// validate does not panic and answers nil or non-empty lines. Beside that,
// a schema generated from the same input (the keywords tool schemas use)
// accepts the instance built to match it, whose JSON text the model might
// write with any spacing, and refuses the instance built to break it.
func FuzzValidateArguments(f *testing.F) {
	seeds := []struct{ schema, args string }{
		{`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`, `{"path":"a"}`},
		{`{"type":"object","properties":{"n":{"type":"integer","minimum":1}}}`, `{"n":0}`},
		{`{"type":"object","additionalProperties":false}`, `{"x":1}`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{"a":{"type":"string"}},"properties":{"a":{"$ref":"#/definitions/a"}}}`, `{"a":1}`},
		{`{"$ref":"https://example.com/remote.json"}`, `{}`},
		{`{"type":"object","properties":{"s":{"type":"string","pattern":"^(a+)+$"}}}`, `{"s":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"}`},
		{`{"type":"nope"}`, `{}`},
		{`not json`, `{}`},
		{``, `{`},
		{`null`, `null`},
		{`{"type":"object","properties":{"x":{"format":"date-time","type":"string"}}}`, `{"x":"yesterday"}`},
		{`{"anyOf":[{"type":"object"},{"type":"array"}],"oneOf":[{"required":["a"]},{"required":["b"]}]}`, `{"a":1,"b":2}`},
		{`{"type":"object","properties":{"big":{"type":"number","maximum":1e308}}}`, `{"big":1e400}`},
	}
	for i, s := range seeds {
		f.Add([]byte(s.schema), []byte(s.args), []byte{byte(i), byte(i * 7), 3, 1, 4, 1, 5, 9, 2, 6})
	}
	f.Fuzz(func(t *testing.T, schema, args, gen []byte) {
		// Arbitrary schema and arguments.
		for _, line := range toolEntry("fuzz_tool", schema).validate(args) {
			if strings.TrimSpace(line) == "" {
				t.Fatalf("empty violation for schema %q args %q", schema, args)
			}
		}

		// A generated schema with instances built to match and to break it.
		g := genObject(&schemaSource{gen}, 0)
		sch := mustMarshal(t, g.schema)
		e := toolEntry("gen_tool", sch)
		if _, err := e.validator(); err != nil {
			t.Fatalf("generated schema does not compile: %v\n%s", err, sch)
		}
		valid := mustMarshal(t, g.valid)
		if errs := e.validate(valid); errs != nil {
			t.Fatalf("schema %s refuses %s, built to match it: %v", sch, valid, errs)
		}
		spaced, err := json.MarshalIndent(g.valid, " ", "\t")
		if err != nil {
			t.Fatal(err)
		}
		if errs := e.validate(spaced); errs != nil {
			t.Fatalf("schema %s refuses indented %s: %v", sch, spaced, errs)
		}
		if g.hasBad {
			invalid := mustMarshal(t, g.invalid)
			if errs := e.validate(invalid); len(errs) == 0 {
				t.Fatalf("schema %s accepts %s, built to break it", sch, invalid)
			}
		}
	})
}
