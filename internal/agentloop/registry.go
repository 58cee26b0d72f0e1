package agentloop

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/jetagent/jetagent/internal/codemode"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// toolKind says how a registry entry is dispatched.
type toolKind int

const (
	kindMCP toolKind = iota
	kindClient
	kindListResources
	kindReadResource
	kindSearchTools
	kindGetToolDetails
	kindCallTool
	kindExecuteCode
)

// entry is one callable tool, with its lazily compiled validator. Entries
// are shared by the jobs of a catalog (and the meta tools' by every job):
// validator compiles once, and the compiled schema is safe for concurrent
// validation.
type entry struct {
	tool toolcache.Tool
	kind toolKind

	once      sync.Once
	schema    *jsonschema.Schema // nil: the schema could not be compiled; calls are not validated
	schemaErr error
	warned    sync.Once // the schema's compile error logged (job.validateCall)

	outOnce   sync.Once
	outSchema *jsonschema.Schema // nil: no outputSchema, or one that could not be compiled

	// compile is compileSchema but for a test's entry (nil: compileSchema).
	compile func(name string, raw json.RawMessage) (*jsonschema.Schema, error)
}

// registry is a job's view of every callable tool: MCP tools, client tools,
// the resource bridge and (in search mode) the meta tools, so every path
// validates and dispatches the same way. Its catalog and entries are the
// job's shared catalog (see catalog), read-only: a job's registry does not
// grow with the catalog.
type registry struct {
	// catalog is what call_tool, search_tools and get_tool_details reach,
	// in order: MCP tools, client tools, resource bridge.
	catalog []toolcache.Tool
	byName  map[string]*entry
	// own are the catalog's tools that are not the ToolSet's.
	own []toolcache.Tool
	// meta shadows byName for direct calls in search and code modes.
	meta map[string]*entry
	// code is the catalog's tools as code sees them (code mode only).
	code *codemode.Catalog

	// live finds a tool in the ToolSet's current catalog (a
	// toolcache.View's Get), which may have grown since the job started;
	// nil for a ToolSet without one. Only errors use it.
	live func(name string) (toolcache.Tool, bool)
	// unavailable lists the ToolSet's servers that are down with no tools
	// listed (a toolcache.View's Unavailable); nil for a ToolSet without
	// one. Only errors use it.
	unavailable func() []toolcache.ServerStatus

	// index is the job's own search index, only for a ToolSet that does
	// not search a shared one (see searchTools).
	searchOnce sync.Once
	index      *toolcache.SearchIndex

	serversOnce sync.Once
	servers     []string // serverNames

	// origins are the job's MCP tools by server and server's own name
	// (jobTool), made on the first search that needs them.
	originsOnce sync.Once
	origins     map[[2]string]*entry
}

var toolNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func newRegistry(c *catalog) *registry {
	return &registry{catalog: c.tools, byName: c.byName, own: c.own}
}

// metaEntries are search mode's meta tools, shared by every job.
var metaEntries = sync.OnceValue(func() map[string]*entry {
	kinds := map[string]toolKind{ToolSearchTools: kindSearchTools, ToolGetToolDetails: kindGetToolDetails, ToolCallTool: kindCallTool}
	m := map[string]*entry{}
	for _, t := range metaTools() {
		m[t.Name] = &entry{
			tool: toolcache.Tool{Name: t.Name, Original: t.Name, Description: t.Description, InputSchema: t.Parameters, Parameters: t.Parameters},
			kind: kinds[t.Name],
		}
	}
	return m
})

func (r *registry) addMeta() { r.meta = metaEntries() }

// addCode makes the registry code mode's: execute_code, search_tools and
// get_tool_details, which answers TypeScript signatures.
func (r *registry) addCode(c *codemode.Catalog) { r.meta, r.code = codeEntries(), c }

// lookup finds a tool the model called directly.
func (r *registry) lookup(name string) (*entry, bool) {
	if e, ok := r.meta[name]; ok {
		return e, true
	}
	e, ok := r.byName[name]
	return e, ok
}

// maxUnknownName bounds the part of an unknown tool's name that is
// compared and quoted: names are at most 64 characters, and the edit
// distance to every tool costs the product of the lengths (a hostile
// server's megabyte name against a large catalog took minutes).
const maxUnknownName = 128

// unknownToolError names the closest tools, so the model can correct itself.
func (r *registry) unknownToolError(name string, direct bool) error {
	if len(name) > maxUnknownName {
		cut := maxUnknownName
		for cut > 0 && !utf8.RuneStart(name[cut]) {
			cut--
		}
		err := r.unknownToolError(name[:cut], direct)
		return fmt.Errorf("%w (the name quoted is the first %d of its %d bytes)", err, cut, len(name))
	}
	if r.live != nil {
		if t, ok := r.live(name); ok {
			// A server announced it (list_changed) while the job ran: the
			// model learnt the name from a result, and "closest names"
			// would not say why the name is refused.
			return fmt.Errorf("unknown tool %q: its server %q added it after this job started, and a job can call only "+
				"the tools it started with (a new job can call it)", name, t.Server)
		}
	}
	if _, ok := r.meta[name]; ok && !direct {
		// call_tool("search_tools") or get_tool_details("call_tool"): the
		// model reached for a meta tool as if it were in the catalog.
		return fmt.Errorf("%q is not a tool of the catalog: call it directly, as the tool of that name in your tools list "+
			"(its definition is there), not through call_tool or get_tool_details", name)
	}
	if direct && r.meta != nil && r.byName[name] == nil {
		// The meta tool of the other mode, which models that know one
		// reach for: the closest names did not say how this job calls.
		switch {
		case r.code != nil && name == ToolCallTool:
			return fmt.Errorf("unknown tool %q: this job calls its tools from JavaScript: run a script with %s, in which each tool "+
				"is an async function on tools (await tools.NAME({...args})); search_tools finds them", name, ToolExecuteCode)
		case r.code == nil && name == ToolExecuteCode:
			return fmt.Errorf("unknown tool %q: this job runs no code: call a tool with %s (name and arguments); search_tools finds them",
				name, ToolCallTool)
		}
	}
	names := make([]string, 0, len(r.byName)+len(r.meta))
	for n := range r.byName {
		names = append(names, n)
	}
	if direct {
		for n := range r.meta {
			names = append(names, n)
		}
	}
	closest := closestNames(name, names, 5)
	if r.unavailable != nil {
		if down := r.unavailable(); len(down) > 0 {
			return downServersError(name, down, closest)
		}
	}
	if len(closest) == 0 {
		return fmt.Errorf("unknown tool %q (no tools are available)", name)
	}
	return fmt.Errorf("unknown tool %q; closest names: %s", name, strings.Join(closest, ", "))
}

// namelessCallError is the result of a call that names no tool (an empty
// or blank function name): the tools the model can call directly, in name
// order, at most maxNamelessList of them.
func (r *registry) namelessCallError() error {
	space := r.byName
	if len(r.meta) > 0 {
		space = r.meta // search and code mode: the tools array's own
	}
	names := slices.Sorted(maps.Keys(space))
	if len(names) == 0 {
		return errors.New("the call names no tool (its function name is empty), and no tools are available: answer in plain text")
	}
	more := ""
	if len(names) > maxNamelessList {
		more = fmt.Sprintf(" and %d more", len(names)-maxNamelessList)
		names = names[:maxNamelessList]
	}
	return fmt.Errorf("the call names no tool (its function name is empty); call a tool by its name: %s%s", strings.Join(names, ", "), more)
}

// maxNamelessList bounds the names namelessCallError lists.
const maxNamelessList = 20

// explainsMissing reports whether unknownToolError says of name more than
// its closest names: its server added it after the job started, or some
// of the job's servers are down with no tools listed. Code mode asks, so
// that its tools object says the same (codeHost.Explain).
func (r *registry) explainsMissing(name string) bool {
	if r.live != nil {
		if _, ok := r.live(name); ok {
			return true
		}
	}
	return r.unavailable != nil && len(r.unavailable()) > 0
}

// maxDownReason bounds the reason quoted for an unavailable server (its
// error can carry the end of a child's stderr).
const maxDownReason = 300

// downServersError is unknownToolError's answer while some of the job's
// servers are down with no tools listed: their tools are missing from the
// catalog, so "closest names" alone had the model guess other names for a
// tool that exists. A name qualified with such a server's name is surely
// one of its tools; any other may be.
func downServersError(name string, down []toolcache.ServerStatus, closest []string) error {
	const later = "the worker keeps reconnecting it, but this job's catalog was fixed when it started: calling it again in this job " +
		"will not help, and a job started once it is back can call them"
	if st, ok := qualifiedBy(name, down); ok {
		return fmt.Errorf("unknown tool %q: its %s, so none of its tools are in this job's catalog; %s", name, downWhat(st), later)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "unknown tool %q; it may be one of the tools of a server that is down: ", name)
	b.WriteString(downList(down))
	b.WriteString(", and offers no tools to this job (" + later + ")")
	if len(closest) > 0 {
		b.WriteString("; closest names of the available tools: " + strings.Join(closest, ", "))
	}
	return errors.New(b.String())
}

// downWhat says that st's server is unavailable, and why.
func downWhat(st toolcache.ServerStatus) string {
	s := fmt.Sprintf("MCP server %q is unavailable (%s", st.Name, st.State)
	if st.Error != "" {
		s += ": " + cutText(st.Error, maxDownReason)
	}
	return s + ")"
}

// downList is downWhat of each of down, at most maxServersNamed.
func downList(down []toolcache.ServerStatus) string {
	parts := make([]string, 0, min(len(down), maxServersNamed)+1)
	for i, st := range down {
		if i == maxServersNamed {
			parts = append(parts, fmt.Sprintf("and %d more", len(down)-maxServersNamed))
			break
		}
		parts = append(parts, downWhat(st))
	}
	return strings.Join(parts, "; ")
}

// qualifiedBy finds the server of down whose name qualifies name, as
// server__tool (the catalog's form, or Claude Code's mcp__server__tool),
// server.tool, server/tool or server:tool.
func qualifiedBy(name string, down []toolcache.ServerStatus) (toolcache.ServerStatus, bool) {
	n := strings.TrimPrefix(strings.TrimSpace(name), "mcp__")
	for _, st := range down {
		for _, sep := range []string{"__", ".", "/", ":"} {
			if rest, ok := strings.CutPrefix(n, st.Name+sep); ok && rest != "" {
				return st, true
			}
		}
	}
	return toolcache.ServerStatus{}, false
}

// cutText is s cut to at most n bytes on a rune boundary, saying so.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// validator compiles the entry's verbatim input schema once.
func (e *entry) validator() (*jsonschema.Schema, error) {
	e.once.Do(func() {
		var errs []error
		for i, s := range []json.RawMessage{e.tool.InputSchema, e.tool.Parameters} {
			if len(bytes.TrimSpace(s)) == 0 || bytes.Equal(bytes.TrimSpace(s), []byte("null")) ||
				(i == 1 && bytes.Equal(s, e.tool.InputSchema)) { // the same error again
				continue
			}
			sch, err := e.compileSafe(e.tool.Name, s)
			if err == nil {
				e.schema = sch
				return
			}
			errs = append(errs, err)
		}
		e.schemaErr = errors.Join(errs...)
	})
	return e.schema, e.schemaErr
}

// checkOutput checks a successful result's structuredContent against the
// tool's outputSchema (MCP: servers must conform, clients should check). A
// result whose structuredContent does not conform is an error result: code mode would hand
// the script a value of another shape than the tool's declared type, and
// the model would take it as what the tool promised. Its text says what
// is wrong and keeps what the tool sent. A tool without an outputSchema,
// or with one that does not compile, and a result without
// structuredContent are not checked.
func (e *entry) checkOutput(r toolcache.Result) toolcache.Result {
	out := bytes.TrimSpace(e.tool.OutputSchema)
	if len(out) == 0 || string(out) == "null" {
		return r
	}
	e.outOnce.Do(func() { e.outSchema, _ = e.compileSafe(e.tool.Name+".output", out) })
	if e.outSchema == nil {
		return r
	}
	if len(r.Structured) == 0 {
		// Servers must send it, but a text-only result is still what the
		// tool said: the model reads it as any other.
		return r
	}
	var why []string
	verdict := "does not match"
	if v, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.Structured)); err != nil {
		why = []string{"its structuredContent is not valid JSON: " + err.Error()}
	} else if p, err := validateOutput(e.outSchema, v); p != nil {
		// The tool ran: what it sent is kept below, not lost to a
		// recovered panic's "failed inside the worker".
		verdict = "could not be checked against"
		why = []string{"the schema library failed checking its structuredContent (" + quoteHead(fmt.Sprint(p)) + ")"}
	} else if err != nil {
		why = violations(err)
	}
	if len(why) == 0 {
		return r
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Error: the result of %s %s the tool's outputSchema:\n", e.tool.Name, verdict)
	for _, w := range why {
		fmt.Fprintf(&b, "- %s\n", w)
	}
	text := r.Text
	if text == "" {
		text = string(r.Structured)
	}
	b.WriteString("What the tool sent: " + text)
	return toolcache.Result{Text: b.String(), IsError: true}
}

// compileSafe is compileSchema with a panic of the schema library turned
// into a compile error. The compile runs under a sync.Once: a panic there
// would fail the job whose call compiled it (prepare runs in the job's
// goroutine) and leave the Once done with neither schema nor error, so
// the same tool's calls in every later job would run unchecked without
// the error ever being recorded. As an error, the schema is what any
// schema that does not compile is, in every job alike: recorded, not
// enforced, the server judges the call.
func (e *entry) compileSafe(name string, raw json.RawMessage) (sch *jsonschema.Schema, err error) {
	compile := compileSchema
	if e.compile != nil {
		compile = e.compile
	}
	defer func() {
		if p := recover(); p != nil {
			sch, err = nil, fmt.Errorf("schema of %q: the schema library failed compiling it: %s", name, quoteHead(fmt.Sprint(p)))
		}
	}()
	return compile(name, raw)
}

func compileSchema(name string, raw json.RawMessage) (*jsonschema.Schema, error) {
	// jsonschema wants values from its own decoder (json.Number etc.).
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema of %q: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	// No loader: the library's default reads file: URLs, so a schema's
	// "$ref": "file:///..." (from an MCP server or a job's client tool)
	// would make the worker read its own files, or block on a FIFO.
	// References within the schema still resolve.
	c.UseLoader(jsonschema.SchemeURLLoader{})
	url := "mem:///tools/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("schema of %q: %w", name, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schema of %q: %w", name, err)
	}
	return sch, nil
}

// validate checks args (a JSON object's text) against the tool's schema and
// returns the violations, one line each; nil when valid. A schema that
// cannot be compiled is not enforced: the server will judge the call.
func (e *entry) validate(args json.RawMessage) []string {
	sch, _ := e.validator()
	if sch == nil {
		return nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return []string{"arguments are not valid JSON: " + err.Error()}
	}
	return violations(validateSafe(sch, v))
}

// validateSafe is sch.Validate(v) with a panic of the schema library
// turned into an error. The library panics on some instances (a number
// whose exponent math/big refuses, 1e-1000001, against a minimum: it
// compares the nil *big.Rat it got): in prepare, on the job's goroutine,
// arguments a model wrote failed the whole job. As an error the call is
// refused, as any call whose arguments do not match, and the model is
// told why.
func validateSafe(sch *jsonschema.Schema, v any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the arguments could not be checked against the input schema: the schema library failed checking them (%s); "+
				"the call was not run: write the arguments another way (numbers in plain notation, without huge exponents)", quoteHead(fmt.Sprint(p)))
		}
	}()
	return sch.Validate(v)
}

// validateOutput is sch.Validate(v) with the schema library's panic
// returned (a number math/big refuses, as in validateSafe).
func validateOutput(sch *jsonschema.Schema, v any) (p any, err error) {
	defer func() { p = recover() }()
	return nil, sch.Validate(v)
}

// violations are a validation error's, one line each, sorted and bounded;
// nil for nil.
func violations(err error) []string {
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{err.Error()}
	}
	var out []string
	leafErrors(ve, &out)
	sort.Strings(out)
	return boundViolations(out)
}

// Bounds on the violations of one call, which go into its events, the
// schema retry's note and its result: the library quotes what it finds
// (an argument name of 100 KB the schema does not allow), and an array of
// 10,000 wrong items has as many.
const (
	maxViolations     = 20
	maxViolationBytes = 300
)

// boundViolations keeps the first maxViolations violations, each cut to
// maxViolationBytes, and says how many more there were.
func boundViolations(out []string) []string {
	n := len(out)
	if n > maxViolations {
		out = out[:maxViolations]
	}
	for i, v := range out {
		if len(v) > maxViolationBytes {
			cut := maxViolationBytes
			for cut > 0 && !utf8.RuneStart(v[cut]) {
				cut--
			}
			out[i] = v[:cut] + fmt.Sprintf("... (%d bytes)", len(v))
		}
	}
	if n > maxViolations {
		out = append(out, fmt.Sprintf("... and %d more violations", n-maxViolations))
	}
	return out
}

// leafErrors flattens a validation error tree to its specific causes.
func leafErrors(e *jsonschema.ValidationError, out *[]string) {
	if len(e.Causes) == 0 {
		if k, ok := e.ErrorKind.(*kind.AdditionalProperties); ok {
			slices.Sort(k.Properties) // the library's come in map order
		}
		*out = append(*out, e.Error()) // "at '/path': message"
		return
	}
	for _, c := range e.Causes {
		leafErrors(c, out)
	}
}
