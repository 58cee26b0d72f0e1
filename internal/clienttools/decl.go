package clienttools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/jetagent/jetagent/internal/toolcache"
)

// Decl is a client tool declared in a job (its client_tools entry).
type Decl struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Limits on a job's declarations; zero fields take the defaults.
type DeclLimits struct {
	MaxTools     int // default 64
	MaxDeclBytes int // one declaration's JSON, default 16 KiB
	MaxBytes     int // all declarations' JSON, default 128 KiB
	// Reserved are names no client tool may take: the tools the worker
	// answers itself (agentloop.BuiltinTools), which a client tool would
	// otherwise replace.
	Reserved []string
}

func (l DeclLimits) withDefaults() DeclLimits {
	if l.MaxTools <= 0 {
		l.MaxTools = 64
	}
	if l.MaxDeclBytes <= 0 {
		l.MaxDeclBytes = 16 << 10
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = 128 << 10
	}
	return l
}

// ValidateDecls checks a job's declarations: names valid for providers and
// unique, input schemas JSON objects that compile (draft 2020-12, no remote
// $ref) and describe an object ("type", when given, is "object"), and
// sizes within the limits. Every problem is reported, joined,
// each wrapping ErrInvalidDecl.
func ValidateDecls(decls []Decl, lim DeclLimits) error {
	lim = lim.withDefaults()
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidDecl}, a...)...))
	}
	if len(decls) > lim.MaxTools {
		bad("%d client tools, at most %d", len(decls), lim.MaxTools)
	}
	seen := map[string]bool{}
	total := 0
	for i, d := range decls {
		b, err := json.Marshal(d)
		if err != nil {
			bad("client tool %d (%q): %v", i, d.Name, err)
			continue
		}
		total += len(b)
		tooBig := len(b) > lim.MaxDeclBytes
		if tooBig {
			bad("client tool %q: %d bytes, at most %d", d.Name, len(b), lim.MaxDeclBytes)
		}
		if !nameRE.MatchString(d.Name) {
			bad("client tool %d: name %q does not match ^[a-zA-Z0-9_-]{1,64}$", i, d.Name)
		}
		if seen[d.Name] {
			bad("client tool %q declared twice", d.Name)
		}
		if slices.Contains(lim.Reserved, d.Name) {
			bad("client tool %q: the name is reserved for a tool the worker answers itself", d.Name)
		}
		seen[d.Name] = true
		if tooBig {
			// Refused already; compiling it could cost minutes (below).
			continue
		}
		// Before compiling: compile time grows about with the cube of the
		// nesting (2,000 levels, 20 KB: a core for minutes), so any
		// submitter could stall a worker with one declaration.
		if err := toolcache.CheckSchemaDepth(d.InputSchema); err != nil {
			bad("client tool %q: input_schema: %v", d.Name, err)
		} else if err := compileSchema(d.InputSchema); err != nil {
			bad("client tool %q: input_schema: %v", d.Name, err)
		} else if err := objectType(d.InputSchema); err != nil {
			bad("client tool %q: input_schema: %v", d.Name, err)
		}
	}
	if total > lim.MaxBytes {
		bad("client tools take %d bytes, at most %d", total, lim.MaxBytes)
	}
	return errors.Join(errs...)
}

// objectType checks that a schema describes an object, when it names a
// type at all (without one, Merge offers it with "type": "object"). A
// tool's arguments are one JSON object, and OpenAI refuses a request
// whose tool's parameters say another type ("schema must be a JSON Schema
// of 'type: "object"', got 'type: "string"'"): a declaration with
// "type": "string" passed the door and the job failed at its first model
// request, whatever its task.
func objectType(schema json.RawMessage) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(schema, &top); err != nil {
		return err
	}
	t, ok := top["type"]
	if !ok || string(bytes.TrimSpace(t)) == `"object"` {
		return nil
	}
	return fmt.Errorf(`its type is %s, not "object": a tool's arguments are one JSON object (put the values in its properties)`, bytes.TrimSpace(t))
}

func compileSchema(schema json.RawMessage) error {
	s := bytes.TrimSpace(schema)
	if len(s) == 0 || s[0] != '{' {
		return errors.New("not a JSON object")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(s))
	if err != nil {
		return err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// No loader, and a URL that is not a file path: the library's default
	// reads file: URLs (and resolves relative ones against the working
	// directory), so a declared "$ref": "/etc/..." would make the worker
	// read its own files, or block on a FIFO.
	c.UseLoader(jsonschema.SchemeURLLoader{})
	const url = "mem:///client-tool.json"
	if err := c.AddResource(url, doc); err != nil {
		return err
	}
	_, err = c.Compile(url)
	var se *jsonschema.SchemaValidationError
	if errors.As(err, &se) {
		var ve *jsonschema.ValidationError
		if errors.As(se.Err, &ve) {
			sortCauses(ve)
		}
	}
	return err
}

// sortCauses orders a validation error's tree: the library lists an
// object's causes (and extra properties) in map order, and the message
// (a dead letter's reason, submit's output) must not vary between runs.
func sortCauses(e *jsonschema.ValidationError) {
	if k, ok := e.ErrorKind.(*kind.AdditionalProperties); ok {
		slices.Sort(k.Properties)
	}
	for _, c := range e.Causes {
		sortCauses(c)
	}
	slices.SortStableFunc(e.Causes, func(a, b *jsonschema.ValidationError) int {
		return strings.Compare(a.Error(), b.Error())
	})
}

// Merge adds the client tools to the server tools. The server wins: a client
// tool whose name a server tool (or an earlier client tool) already has is
// left out and its name returned in clashes, for the loop to report as an
// event. Client tools come after the server tools, in declaration order,
// with Server "" and Parameters normalised as for MCP tools. Validate the
// declarations first: a schema Merge cannot normalise is offered as
// {"type":"object"} (the worker still validates against InputSchema).
func Merge(server []toolcache.Tool, client []Decl) (merged []toolcache.Tool, clashes []string) {
	merged = append(make([]toolcache.Tool, 0, len(server)+len(client)), server...)
	taken := make(map[string]bool, len(server)+len(client))
	for _, t := range server {
		taken[t.Name] = true
	}
	for _, d := range client {
		if taken[d.Name] {
			clashes = append(clashes, d.Name)
			continue
		}
		taken[d.Name] = true
		params, err := toolcache.NormalizeSchema(d.InputSchema)
		if err != nil {
			params = json.RawMessage(`{"type":"object"}`)
		}
		in := d.InputSchema
		if len(bytes.TrimSpace(in)) == 0 {
			in = json.RawMessage(`{"type":"object"}`)
		}
		merged = append(merged, toolcache.Tool{
			Name:        d.Name,
			Original:    d.Name,
			Description: d.Description,
			InputSchema: in,
			Parameters:  params,
		})
	}
	return merged, clashes
}
