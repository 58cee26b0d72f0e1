package toolcache

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// rawTool is one entry of a tools/list result, decoded without losing the
// schemas (mcp-go's mcp.Tool keeps only part of an input schema).
type rawTool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
	Annotations  *struct {
		Title string `json:"title"`
		Annotations
	} `json:"annotations"`
}

// toolFromRaw converts a server's tool definition into a registry Tool owned
// by server. Name is left equal to the original; assignNames finalises it.
func toolFromRaw(server string, data json.RawMessage) (Tool, error) {
	var rt rawTool
	if err := json.Unmarshal(data, &rt); err != nil {
		var named struct{ Name string }
		if json.Unmarshal(data, &named) == nil && named.Name != "" {
			return Tool{}, fmt.Errorf("tool %q: %w", named.Name, err) // which one the log should say
		}
		return Tool{}, fmt.Errorf("tool definition: %w", err)
	}
	if rt.Name == "" {
		return Tool{}, fmt.Errorf("tool definition without a name")
	}
	t := Tool{
		Name:        rt.Name,
		Original:    rt.Name,
		Server:      server,
		Title:       rt.Title,
		Description: rt.Description,
	}
	if rt.Annotations != nil {
		t.Annotations = rt.Annotations.Annotations
		if t.Title == "" {
			t.Title = rt.Annotations.Title
		}
	}
	if isNull(rt.InputSchema) {
		t.InputSchema = json.RawMessage(`{"type":"object"}`)
	} else {
		t.InputSchema = compact(rt.InputSchema)
	}
	params, err := NormalizeSchema(t.InputSchema)
	if err == nil {
		err = objectType(params)
	}
	if err == nil {
		err = CheckSchemaDepth(t.InputSchema)
	}
	if err != nil {
		return Tool{}, fmt.Errorf("tool %q: inputSchema: %w", rt.Name, err)
	}
	t.Parameters = params
	if !isNull(rt.OutputSchema) {
		t.OutputSchema = compact(rt.OutputSchema)
	}
	return t, nil
}

// objectType refuses a schema whose top-level "type" does not say object:
// MCP requires an object schema of arguments, and OpenAI refuses a whole
// request offering a function whose parameters have another type ("schema
// must be a JSON Schema of 'type: "object"', got 'type: "string"'"), so
// one such tool would fail every job that sees it; every call of it fails
// validation anyway (arguments are always an object).
func objectType(schema json.RawMessage) error {
	var s struct {
		Type json.RawMessage `json:"type"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return err
	}
	var one string
	if json.Unmarshal(s.Type, &one) == nil && one == "object" {
		return nil
	}
	return fmt.Errorf(`"type" is %s, not "object" (the arguments of a call are an object)`, s.Type)
}

// MaxSchemaDepth bounds the nesting (of JSON objects and arrays) of a
// tool's input schema. Compiling a schema for validation takes time about
// cubic in its depth (measured with the validator the loop uses: 1,000
// levels 5 s, 2,000 levels 38 s, the first call of the tool waiting),
// while the deepest input schema of 1,044 real tools in the shared
// catalogs nests 21 levels.
const MaxSchemaDepth = 100

// MaxSchemaObjects bounds the JSON objects (subschemas, roughly) of a
// tool's input schema. Compiling takes time about quadratic in their
// number (measured with the validator the loop uses: 10,000 properties
// 0.6 s, 20,000 2.4 s, 60,000 — a 5 MB schema — 29 s, the first call of
// the tool waiting, again at each new catalog version), while the input
// schema with the most objects of 1,044 real tools in the shared catalogs
// has 91.
const MaxSchemaObjects = 10000

// CheckSchemaDepth refuses a schema nested deeper than MaxSchemaDepth or
// holding more than MaxSchemaObjects objects (client tool declarations are
// held to it too). It reads tokens, so it costs time linear in the
// schema's size.
func CheckSchemaDepth(schema json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(schema))
	depth, objects := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break // the end, or what NormalizeSchema already reported
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			if depth > MaxSchemaDepth {
				return fmt.Errorf("nests more than %d levels deep (validating calls against it would cost minutes of CPU)", MaxSchemaDepth)
			}
			if tok == json.Delim('{') {
				if objects++; objects > MaxSchemaObjects {
					return fmt.Errorf("holds more than %d subschemas (JSON objects; validating calls against it would cost seconds to minutes of CPU)", MaxSchemaObjects)
				}
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// servable says why the pool cannot call the tool a definition describes
// (nil: it can). A tool whose execution.taskSupport is "required" answers
// only task-augmented tools/call requests (MCP tasks), which the pool does
// not make: every call would fail ("requires task augmentation"), so it is
// left out rather than offered to the model.
func servable(data json.RawMessage) error {
	var d struct {
		Name      string `json:"name"`
		Execution *struct {
			TaskSupport string `json:"taskSupport"`
		} `json:"execution"`
	}
	if json.Unmarshal(data, &d) != nil || d.Execution == nil {
		return nil
	}
	if d.Execution.TaskSupport == "required" {
		return fmt.Errorf("tool %q: execution.taskSupport is \"required\": it runs only as an MCP task, which this client does not start", d.Name)
	}
	return nil
}

func isNull(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) == 0 || bytes.Equal(b, []byte("null"))
}

func compact(b json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

// NormalizeSchema prepares a tool's input schema for model providers: the
// top-level "$schema" is dropped (some providers reject it), "type":"object"
// is added when missing, and null or empty becomes {"type":"object"}. Key
// order of the rest is kept, so the token count stays that of the original.
func NormalizeSchema(schema json.RawMessage) (json.RawMessage, error) {
	if isNull(schema) {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	dec := json.NewDecoder(bytes.NewReader(schema))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("schema is not a JSON object")
	}
	var out bytes.Buffer
	out.WriteByte('{')
	n := 0
	hasType := false
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := kt.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		if key == "$schema" {
			continue
		}
		if key == "type" {
			hasType = true
		}
		if n > 0 {
			out.WriteByte(',')
		}
		kb, _ := json.Marshal(key)
		out.Write(kb)
		out.WriteByte(':')
		if err := json.Compact(&out, val); err != nil {
			return nil, err
		}
		n++
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if !hasType {
		// Prepend, so the normalised schema reads like a hand-written one.
		body := out.Bytes()[1:]
		var b bytes.Buffer
		b.WriteString(`{"type":"object"`)
		if n > 0 {
			b.WriteByte(',')
		}
		b.Write(body)
		b.WriteByte('}')
		return b.Bytes(), nil
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}
