package codemode

import (
	"bytes"
	"encoding/json"
	"errors"
)

// jobj is a JSON object that keeps its key order, so declarations list the
// properties in the order the schema gives them.
type jobj struct {
	keys []string
	m    map[string]any
}

func (o *jobj) get(k string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.m[k]
	return v, ok
}

func (o *jobj) str(k string) string {
	v, _ := o.get(k)
	s, _ := v.(string)
	return s
}

// parseSchema decodes a JSON Schema into jobj / []any / string /
// json.Number / bool / nil values. Empty or invalid input gives nil (no
// schema).
func parseSchema(raw json.RawMessage) any {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	v, err := decodeOrdered(d, 0)
	if err != nil {
		return nil
	}
	return v
}

// maxSchemaDepth bounds the nesting decodeOrdered accepts; deeper schemas
// are treated as absent.
const maxSchemaDepth = 200

var errSchemaDepth = errors.New("schema nested too deeply")

func decodeOrdered(d *json.Decoder, depth int) (any, error) {
	if depth > maxSchemaDepth {
		return nil, errSchemaDepth
	}
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &jobj{m: map[string]any{}}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				v, err := decodeOrdered(d, depth+1)
				if err != nil {
					return nil, err
				}
				if _, dup := o.m[k]; !dup {
					o.keys = append(o.keys, k)
				}
				o.m[k] = v
			}
			if _, err := d.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			var a []any
			for d.More() {
				v, err := decodeOrdered(d, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := d.Token(); err != nil {
				return nil, err
			}
			if a == nil {
				a = []any{}
			}
			return a, nil
		}
		return nil, errors.New("unexpected delimiter")
	default:
		return t, nil
	}
}

// properties returns the names of the schema's properties, in order, and
// which of them are required.
func properties(s any) (names []string, props *jobj, required map[string]bool) {
	o, ok := s.(*jobj)
	if !ok {
		return nil, nil, nil
	}
	p, _ := o.get("properties")
	props, _ = p.(*jobj)
	required = map[string]bool{}
	if r, ok := o.get("required"); ok {
		if list, ok := r.([]any); ok {
			for _, x := range list {
				if n, ok := x.(string); ok {
					required[n] = true
				}
			}
		}
	}
	if props != nil {
		names = props.keys
	}
	return names, props, required
}
