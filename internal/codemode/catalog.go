package codemode

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Tool is one tool the code may call.
type Tool struct {
	// Name is the model-facing name (what search_tools returns), e.g.
	// "github-get_issue" or "logging_getLogs". Host.Call receives it.
	Name        string
	Description string
	// InputSchema is the JSON Schema of the arguments; empty means any object.
	InputSchema json.RawMessage
	// OutputSchema is the JSON Schema of the structured result; optional.
	OutputSchema json.RawMessage
}

// Catalog is the set of tools of one execution context (typically a job),
// with the JavaScript identifier of each. Build it once with NewCatalog and
// use it for Run, Declarations and Index, so the three agree on the names.
// A Catalog is immutable and safe for concurrent use.
type Catalog struct {
	tools  []Tool         // unique names, in the order given
	ident  []string       // ident[i] is the identifier of tools[i]
	tsName []string       // tsName[i] is the TypeScript type-name stem of tools[i]
	byName map[string]int // name → index
	byID   map[string]int // ident → index
	sorted []int          // indexes in ident order
	schema []schemaPair   // parsed schemas, for Declarations and Index
}

type schemaPair struct{ in, out any }

// NewCatalog builds the catalog of tools. A name given twice keeps its first
// occurrence. Identifiers are assigned deterministically and do not depend
// on the order of tools: a name that already is a valid identifier keeps
// it; the others get Ident(name), and when that is taken, the first free of
// Ident(name)+"_2", "_3", ... in the byte order of the names.
func NewCatalog(tools []Tool) *Catalog {
	c := &Catalog{byName: map[string]int{}, byID: map[string]int{}}
	for _, t := range tools {
		if _, dup := c.byName[t.Name]; dup {
			continue
		}
		c.byName[t.Name] = len(c.tools)
		c.tools = append(c.tools, t)
	}
	c.ident = make([]string, len(c.tools))
	// Names that are identifiers already keep them, but for the names
	// JavaScript looks up on any object by itself (implicit).
	for i, t := range c.tools {
		if Ident(t.Name) == t.Name && !implicit[t.Name] {
			c.ident[i] = t.Name
			c.byID[t.Name] = i
		}
	}
	// The others, in name order, take the first free form.
	rest := make([]int, 0, len(c.tools))
	for i := range c.tools {
		if c.ident[i] == "" {
			rest = append(rest, i)
		}
	}
	sort.Slice(rest, func(a, b int) bool { return c.tools[rest[a]].Name < c.tools[rest[b]].Name })
	for _, i := range rest {
		base := Ident(c.tools[i].Name)
		if implicit[base] {
			base += "_"
		}
		id := base
		for n := 2; ; n++ {
			if _, taken := c.byID[id]; !taken {
				break
			}
			id = base + "_" + strconv.Itoa(n)
		}
		c.ident[i] = id
		c.byID[id] = i
	}
	c.sorted = make([]int, len(c.tools))
	for i := range c.sorted {
		c.sorted[i] = i
	}
	sort.Slice(c.sorted, func(a, b int) bool { return c.ident[c.sorted[a]] < c.ident[c.sorted[b]] })
	// TypeScript type names: PascalCase of the identifier, made unique in
	// identifier order.
	c.tsName = make([]string, len(c.tools))
	usedTS := map[string]bool{}
	for _, i := range c.sorted {
		base := pascal(c.ident[i])
		name := base
		for n := 2; usedTS[name]; n++ {
			name = base + strconv.Itoa(n)
		}
		usedTS[name] = true
		c.tsName[i] = name
	}
	c.schema = make([]schemaPair, len(c.tools))
	for i, t := range c.tools {
		c.schema[i] = schemaPair{in: parseSchema(t.InputSchema), out: parseSchema(t.OutputSchema)}
	}
	return c
}

// implicit holds the names JavaScript reads on an object without the code
// asking: await and a promise's resolution call a callable then (a tool
// named "then" as tools.then made tools a thenable: awaiting or returning
// tools called the tool), String() and templates call toString and
// valueOf, JSON.stringify calls toJSON, Array's toLocaleString calls
// toLocaleString. A tool with such a name is tools.NAME_ (declared so, and
// its name is not a key of tools: tools.then and tools["then"] are
// undefined).
var implicit = map[string]bool{"then": true, "toJSON": true, "toString": true, "valueOf": true, "toLocaleString": true}

// Tools returns the catalog's tools (unique names, in the order given).
func (c *Catalog) Tools() []Tool { return append([]Tool(nil), c.tools...) }

// Ident returns the identifier of the tool name on the tools object, and
// false when the catalog has no such tool.
func (c *Catalog) Ident(name string) (string, bool) {
	i, ok := c.byName[name]
	if !ok {
		return "", false
	}
	return c.ident[i], true
}

// Name returns the tool name of an identifier, and false when there is none.
func (c *Catalog) Name(ident string) (string, bool) {
	i, ok := c.byID[ident]
	if !ok {
		return "", false
	}
	return c.tools[i].Name, true
}

// Ident returns the identifier form of a tool name: ASCII letters, digits,
// '_' and '$' are kept, every other character becomes '_', and a leading
// digit (or an empty name) gets a '_' in front. It is the identity for a
// name that is already such an identifier ("logging_getLogs"), and
// "github-get_issue" becomes "github_get_issue". Reserved words are valid
// (the code writes tools.delete(...)); names starting "__codemode", which
// the sandbox reserves, get a 't' in front. Collisions between tools, and
// the names JavaScript reads on any object by itself (then, toJSON,
// toString, valueOf, toLocaleString: NAME_), are resolved by NewCatalog,
// whose Ident method gives a tool's identifier.
func Ident(name string) string {
	var b strings.Builder
	for i, r := range name {
		switch {
		case r == '_' || r == '$' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
			b.WriteRune(r)
		case r >= '0' && r <= '9':
			if i == 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	id := b.String()
	if strings.HasPrefix(id, "__codemode") {
		id = "t" + id // the prefix is reserved for the sandbox
	}
	return id
}

// pascal turns an identifier into a PascalCase type-name stem:
// "github_get_issue" → "GithubGetIssue".
func pascal(id string) string {
	var b strings.Builder
	up := true
	for _, r := range id {
		if r == '_' || r == '$' {
			up = true
			continue
		}
		if up && r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		up = false
		b.WriteRune(r)
	}
	s := b.String()
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		s = "T" + s
	}
	return s
}

// Index returns a compact index of the catalog for the execute_code
// description: one line per tool, in identifier order, with the identifier,
// its parameter names (optional ones marked '?') and the first sentence of
// its description. When the lines exceed maxBytes (maxBytes <= 0: no
// limit) the index stops at the last whole line that fits and ends with a
// note saying how many tools are not listed. The result depends only on the
// catalog's tools, not on their order: it is byte-identical for the same
// set of tools.
func (c *Catalog) Index(maxBytes int) string {
	var b strings.Builder
	total := len(c.sorted)
	for n, i := range c.sorted {
		line := c.indexLine(i)
		if n > 0 {
			line = "\n" + line
		}
		if maxBytes > 0 {
			// What must still fit after this line: the note for the
			// tools after it, if any.
			after := 0
			if rest := total - n - 1; rest > 0 {
				after = 1 + len(indexNote(rest, total))
			}
			if b.Len()+len(line)+after > maxBytes {
				if n > 0 {
					b.WriteByte('\n')
				}
				b.WriteString(indexNote(total-n, total))
				return b.String()
			}
		}
		b.WriteString(line)
	}
	return b.String()
}

func indexNote(missing, total int) string {
	return fmt.Sprintf("[index cut: %d of %d tools not listed]", missing, total)
}

// indexLine is "tools.ident({a, b?}): First sentence."
func (c *Catalog) indexLine(i int) string {
	var b strings.Builder
	b.WriteString(c.ident[i])
	b.WriteByte('(')
	if params := paramList(c.schema[i].in); params != "" {
		b.WriteString("{")
		b.WriteString(params)
		b.WriteString("}")
	}
	b.WriteByte(')')
	if d := firstSentence(c.tools[i].Description, 120); d != "" {
		b.WriteString(": ")
		b.WriteString(d)
	}
	return b.String()
}

// paramList lists the property names of an input schema in schema order,
// the optional ones marked '?', at most maxParams names.
func paramList(s any) string {
	const maxParams = 8
	names, _, req := properties(s)
	var parts []string
	for _, n := range names {
		if len(parts) == maxParams {
			break
		}
		k := n
		if !isIdentifierName(k) {
			k = strconv.Quote(k)
		}
		if !req[n] {
			k += "?"
		}
		parts = append(parts, k)
	}
	out := strings.Join(parts, ", ")
	if more := len(names) - len(parts); more > 0 {
		out += fmt.Sprintf(", …%d more", more)
	}
	return out
}

// firstSentence is the first line or sentence of a description, with
// whitespace collapsed, cut to at most max bytes (with "…").
func firstSentence(d string, max int) string {
	d = strings.TrimSpace(d)
	if i := strings.IndexAny(d, "\r\n"); i >= 0 {
		d = d[:i]
	}
	if i := strings.Index(d, ". "); i >= 0 {
		d = d[:i+1]
	}
	d = strings.Join(strings.Fields(d), " ")
	if len(d) > max {
		cut := max - len("…")
		for cut > 0 && !utf8.RuneStart(d[cut]) {
			cut--
		}
		d = strings.TrimRight(d[:cut], " ") + "…"
	}
	return d
}

func isIdentifierName(s string) bool {
	return s != "" && Ident(s) == s
}
