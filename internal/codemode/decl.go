package codemode

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Declarations returns TypeScript declarations of the named tools (all the
// catalog's tools when no name is given), for get_tool_details: an
// interface per input and output schema and a `declare const tools` with
// one method per tool,
//
//	github_get_issue(args: GithubGetIssueInput): Promise<GithubGetIssueOutput>;
//
// Objects become interface bodies (properties in schema order, optional
// unless required, JSDoc from descriptions, defaults and formats), enums
// and consts string-literal (or number-literal) unions, arrays T[] or
// tuples, anyOf/oneOf unions, allOf intersections, local $refs are
// expanded (a cycle becomes unknown); anything else, or a schema nested
// deeper than a few levels, is unknown. A tool without an output schema
// returns Promise<unknown>. Names the catalog does not have are listed in
// a comment. The result is deterministic.
func (c *Catalog) Declarations(names ...string) string {
	var order []int
	var unknown []string
	if len(names) == 0 {
		order = append(order, c.sorted...)
	} else {
		seen := map[int]bool{}
		for _, n := range names {
			i, ok := c.byName[n]
			if !ok {
				if j, ok2 := c.byID[n]; ok2 {
					i, ok = j, true
				}
			}
			if !ok {
				unknown = append(unknown, n)
				continue
			}
			if !seen[i] {
				seen[i] = true
				order = append(order, i)
			}
		}
	}
	var b strings.Builder
	for _, n := range unknown {
		fmt.Fprintf(&b, "// no tool named %s\n", strconv.Quote(n))
	}
	type method struct{ doc, sig string }
	var methods []method
	for _, i := range order {
		t := c.tools[i]
		in, out := c.schema[i].in, c.schema[i].out
		inName, outName := c.tsName[i]+"Input", c.tsName[i]+"Output"

		g := &tsGen{root: in}
		inType := g.objectOrAny(in)
		writeTypeDecl(&b, inName, inType, schemaDoc(in))

		ret := "unknown"
		if out != nil {
			g := &tsGen{root: out}
			writeTypeDecl(&b, outName, g.typ(out, "", 0), schemaDoc(out))
			ret = outName
		}
		_, _, req := properties(in)
		param := "args: " + inName
		if len(req) == 0 {
			param = "args?: " + inName
		}
		doc := t.Description
		if c.ident[i] != t.Name {
			if doc != "" {
				doc += "\n"
			}
			doc += "Tool " + strconv.Quote(t.Name) + "."
			if implicit[t.Name] {
				doc = strings.TrimSuffix(doc, ".") + ": call it as tools." + c.ident[i] + " (tools." + t.Name + " is undefined, since JavaScript calls an object's " + t.Name + " by itself)."
			}
		}
		methods = append(methods, method{
			doc: jsdoc(doc, nil, "  "),
			sig: fmt.Sprintf("  %s(%s): Promise<%s>;\n", c.ident[i], param, ret),
		})
	}
	b.WriteString("declare const tools: {\n")
	for _, m := range methods {
		b.WriteString(m.doc)
		b.WriteString(m.sig)
	}
	b.WriteString("};\n")
	return b.String()
}

func writeTypeDecl(b *strings.Builder, name, typ, doc string) {
	b.WriteString(jsdoc(doc, nil, ""))
	if strings.HasPrefix(typ, "{") && !strings.Contains(typ, "\n} | ") && !strings.Contains(typ, "\n} & ") {
		fmt.Fprintf(b, "interface %s %s\n\n", name, typ)
	} else {
		fmt.Fprintf(b, "type %s = %s;\n\n", name, typ)
	}
}

// schemaDoc is the description of a schema (or its title).
func schemaDoc(s any) string {
	o, ok := s.(*jobj)
	if !ok {
		return ""
	}
	if d := o.str("description"); d != "" {
		return d
	}
	return o.str("title")
}

// jsdoc renders a JSDoc comment at the given indentation, or "" when there
// is nothing to say.
func jsdoc(text string, tags []string, indent string) string {
	text = strings.TrimSpace(text)
	if text == "" && len(tags) == 0 {
		return ""
	}
	var lines []string
	if text != "" {
		for _, l := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
			lines = append(lines, strings.TrimRight(l, " \t"))
		}
	}
	lines = append(lines, tags...)
	for i, l := range lines {
		lines[i] = strings.ReplaceAll(l, "*/", "*\\/")
	}
	if len(lines) == 1 {
		return indent + "/** " + lines[0] + " */\n"
	}
	var b strings.Builder
	b.WriteString(indent + "/**\n")
	for _, l := range lines {
		if l == "" {
			b.WriteString(indent + " *\n")
		} else {
			b.WriteString(indent + " * " + l + "\n")
		}
	}
	b.WriteString(indent + " */\n")
	return b.String()
}

// tsMaxDepth bounds how deep declarations follow nested schemas.
const tsMaxDepth = 12

// tsGen turns one schema (and the local $refs in it) into TypeScript.
type tsGen struct {
	root     any
	inRef    map[string]bool
	refCount int
}

// objectOrAny is typ for an input schema, where no schema means any object.
func (g *tsGen) objectOrAny(s any) string {
	if s == nil || s == true {
		return "{\n  [key: string]: unknown;\n}"
	}
	return g.typ(s, "", 0)
}

// typ renders schema s as a TypeScript type; indent is the indentation of
// the line the type starts on.
func (g *tsGen) typ(s any, indent string, depth int) string {
	if depth > tsMaxDepth {
		return "unknown"
	}
	switch s := s.(type) {
	case bool:
		if s {
			return "unknown"
		}
		return "never"
	case *jobj:
		return g.objType(s, indent, depth)
	}
	return "unknown"
}

func (g *tsGen) objType(o *jobj, indent string, depth int) string {
	if ref := o.str("$ref"); ref != "" {
		return g.ref(ref, indent, depth)
	}
	if v, ok := o.get("const"); ok {
		return literal(v)
	}
	if v, ok := o.get("enum"); ok {
		if list, ok := v.([]any); ok && len(list) > 0 {
			var parts []string
			for _, x := range list {
				parts = append(parts, literal(x))
			}
			return union(parts)
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if v, ok := o.get(k); ok {
			if list, ok := v.([]any); ok && len(list) > 0 {
				var parts []string
				for _, x := range list {
					parts = append(parts, g.typ(x, indent, depth+1))
				}
				return nullable(o, union(parts))
			}
		}
	}
	var inter []string
	if v, ok := o.get("allOf"); ok {
		if list, ok := v.([]any); ok {
			for _, x := range list {
				if t := g.typ(x, indent, depth+1); t != "unknown" {
					inter = append(inter, t)
				}
			}
		}
	}
	own := g.ownType(o, indent, depth)
	if len(inter) > 0 {
		if own != "unknown" {
			inter = append([]string{own}, inter...)
		}
		return nullable(o, strings.Join(wrapAll(inter), " & "))
	}
	return nullable(o, own)
}

// ownType is the type from "type" (or what the keywords imply).
func (g *tsGen) ownType(o *jobj, indent string, depth int) string {
	var types []string
	switch t := mustGet(o, "type").(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				types = append(types, s)
			}
		}
	}
	if len(types) == 0 {
		switch {
		case has(o, "properties") || has(o, "additionalProperties") || has(o, "patternProperties"):
			types = []string{"object"}
		case has(o, "items") || has(o, "prefixItems"):
			types = []string{"array"}
		default:
			return "unknown"
		}
	}
	var parts []string
	for _, t := range types {
		switch t {
		case "string":
			parts = append(parts, "string")
		case "number", "integer":
			parts = append(parts, "number")
		case "boolean":
			parts = append(parts, "boolean")
		case "null":
			parts = append(parts, "null")
		case "array":
			parts = append(parts, g.arrayType(o, indent, depth))
		case "object":
			parts = append(parts, g.objectType(o, indent, depth))
		default:
			parts = append(parts, "unknown")
		}
	}
	return union(parts)
}

func (g *tsGen) arrayType(o *jobj, indent string, depth int) string {
	tuple, _ := mustGet(o, "prefixItems").([]any)
	if tuple == nil {
		tuple, _ = mustGet(o, "items").([]any) // draft-07 tuples
	}
	if tuple != nil {
		var parts []string
		for _, x := range tuple {
			parts = append(parts, g.typ(x, indent, depth+1))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	items, ok := o.get("items")
	if !ok {
		return "unknown[]"
	}
	return wrap(g.typ(items, indent, depth+1)) + "[]"
}

func (g *tsGen) objectType(o *jobj, indent string, depth int) string {
	names, props, req := properties(o)
	inner := indent + "  "
	var b strings.Builder
	b.WriteString("{\n")
	for _, n := range names {
		p, _ := props.get(n)
		b.WriteString(jsdoc(propDoc(p), propTags(p), inner))
		key := n
		if !isIdentifierName(key) {
			key = jsonString(n)
		}
		opt := "?"
		if req[n] {
			opt = ""
		}
		fmt.Fprintf(&b, "%s%s%s: %s;\n", inner, key, opt, g.typ(p, inner, depth+1))
	}
	add, hasAdd := o.get("additionalProperties")
	switch {
	case hasAdd && add != false && add != true:
		fmt.Fprintf(&b, "%s[key: string]: %s;\n", inner, g.typ(add, inner, depth+1))
	case add == true, !hasAdd && props == nil, has(o, "patternProperties") && add != false:
		fmt.Fprintf(&b, "%s[key: string]: unknown;\n", inner)
	}
	if b.Len() == 2 {
		return "{}"
	}
	b.WriteString(indent + "}")
	return b.String()
}

// ref expands a local JSON pointer ("#/$defs/X", "#/definitions/X", "#").
func (g *tsGen) ref(ref string, indent string, depth int) string {
	if g.inRef[ref] || g.refCount > 200 || !strings.HasPrefix(ref, "#") {
		return "unknown"
	}
	target, ok := pointer(g.root, strings.TrimPrefix(ref, "#"))
	if !ok {
		return "unknown"
	}
	if g.inRef == nil {
		g.inRef = map[string]bool{}
	}
	g.refCount++
	g.inRef[ref] = true
	defer delete(g.inRef, ref)
	return g.typ(target, indent, depth+1)
}

// pointer resolves a JSON pointer ("/a/b") in a decoded schema.
func pointer(root any, p string) (any, bool) {
	if p == "" {
		return root, true
	}
	if !strings.HasPrefix(p, "/") {
		return nil, false
	}
	cur := root
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case *jobj:
			v, ok := c.get(tok)
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			n, err := strconv.Atoi(tok)
			if err != nil || n < 0 || n >= len(c) {
				return nil, false
			}
			cur = c[n]
		default:
			return nil, false
		}
	}
	return cur, true
}

func propDoc(p any) string {
	o, ok := p.(*jobj)
	if !ok {
		return ""
	}
	return o.str("description")
}

// propTags are the JSDoc tags of a property: its default, format, range.
func propTags(p any) []string {
	o, ok := p.(*jobj)
	if !ok {
		return nil
	}
	var tags []string
	if v, ok := o.get("default"); ok {
		tags = append(tags, "@default "+compactJSON(v))
	}
	if f := o.str("format"); f != "" {
		tags = append(tags, "@format "+f)
	}
	for _, k := range []string{"minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "pattern"} {
		if v, ok := o.get(k); ok {
			tags = append(tags, "@"+k+" "+compactJSON(v))
		}
	}
	return tags
}

// literal renders a JSON value as a TypeScript literal type.
func literal(v any) string {
	switch v := v.(type) {
	case string:
		return jsonString(v)
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case nil:
		return "null"
	}
	return "unknown"
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// compactJSON renders a decoded value back as compact JSON (objects in
// their original key order).
func compactJSON(v any) string {
	switch v := v.(type) {
	case *jobj:
		parts := make([]string, 0, len(v.keys))
		for _, k := range v.keys {
			parts = append(parts, jsonString(k)+":"+compactJSON(v.m[k]))
		}
		return "{" + strings.Join(parts, ",") + "}"
	case []any:
		parts := make([]string, 0, len(v))
		for _, x := range v {
			parts = append(parts, compactJSON(x))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return literal(v)
}

// union joins types with |, dropping duplicates; unknown absorbs the rest.
func union(parts []string) string {
	seen := map[string]bool{}
	var out []string
	for _, p := range parts {
		if p == "unknown" {
			return "unknown"
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return "never"
	}
	if len(out) == 1 {
		return out[0]
	}
	return strings.Join(wrapAll(out), " | ")
}

// nullable adds "| null" for OpenAPI's nullable: true.
func nullable(o *jobj, t string) string {
	if v, _ := o.get("nullable"); v == true && t != "unknown" {
		return union([]string{t, "null"})
	}
	return t
}

// wrap parenthesises a union or intersection used as an operand.
func wrap(t string) string {
	if strings.Contains(t, " | ") || strings.Contains(t, " & ") {
		return "(" + t + ")"
	}
	return t
}

func wrapAll(ts []string) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = wrap(t)
	}
	return out
}

func has(o *jobj, k string) bool { _, ok := o.get(k); return ok }

func mustGet(o *jobj, k string) any { v, _ := o.get(k); return v }
