package agentloop

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/jetagent/jetagent/internal/codemode"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// Names of the tools the loop itself answers.
const (
	ToolSearchTools      = "search_tools"
	ToolGetToolDetails   = "get_tool_details"
	ToolCallTool         = "call_tool"
	ToolListResources    = "mcp_list_resources"
	ToolReadResource     = "mcp_read_resource"
	defaultSearchLimit   = 10
	maxSearchLimit       = 50
	maxOneLineDescLength = 160
)

// permissiveSchema is the deferred-mode parameters: any object. Never null,
// which several providers reject.
var permissiveSchema = json.RawMessage(`{"type":"object"}`)

// metaTools are search mode's fixed tools array. Constant text, so the
// array is byte-identical in every request of every search-mode job.
func metaTools() []llm.Tool {
	return []llm.Tool{
		{
			Name:        ToolSearchTools,
			Description: "Find tools for a request (keywords or the request itself). Answers a JSON array, best first, of {name, server, description, call}; call is the tool's signature name(param: type, optional?: type), enough to use call_tool at once. A first line \"Note: ...\" says when nothing matched well.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"},"server":{"type":"string","description":"only this server's tools"},"limit":{"type":"integer","minimum":1,"maximum":50,"description":"default 10"}},"required":["query"],"additionalProperties":false}`),
		},
		{
			Name:        ToolGetToolDetails,
			Description: "Get a tool's full description and input JSON Schema, when its search_tools signature is not enough.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}`),
		},
		{
			Name:        ToolCallTool,
			Description: "Call a tool by name with arguments matching its signature or input schema; invalid arguments are answered with the full schema.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"},"arguments":{"type":"object"}},"required":["name","arguments"],"additionalProperties":false}`),
		},
	}
}

// resourceTools bridge MCP resources as tools; offered when any exist.
func resourceTools() []toolcache.Tool {
	list := json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)
	read := json.RawMessage(`{"type":"object","properties":{"uri":{"type":"string","description":"The resource URI, or its name as listed by mcp_list_resources."}},"required":["uri"],"additionalProperties":false}`)
	return []toolcache.Tool{
		{Name: ToolListResources, Original: ToolListResources, Description: "List the MCP resources (documents, files, data) that can be read with mcp_read_resource.", InputSchema: list, Parameters: list},
		{Name: ToolReadResource, Original: ToolReadResource, Description: "Read an MCP resource by URI or name and return its text.", InputSchema: read, Parameters: read},
	}
}

// BuildTools returns exactly the tools array the loop sends on the first
// request of a job in mode, for a catalog of tools (the loop passes the
// job's whole catalog: MCP tools, then client tools, then the resource
// bridge). ModeAuto resolves with DefaultAutoThresholds.
func BuildTools(mode Mode, tools []toolcache.Tool) ([]llm.Tool, error) {
	if mode == ModeAuto {
		m, _, err := chooseMode(DefaultAutoThresholds(), tools)
		if err != nil {
			return nil, err
		}
		mode = m
	}
	switch mode {
	case ModeFull:
		out := make([]llm.Tool, len(tools))
		for i, t := range tools {
			out[i] = fullTool(t)
		}
		return out, nil
	case ModeDeferred:
		out := make([]llm.Tool, len(tools))
		for i, t := range tools {
			out[i] = deferredTool(t)
		}
		return out, nil
	case ModeSearch:
		return metaTools(), nil
	case ModeCode:
		return codeModeTools(codeCatalog(tools)), nil
	default:
		return nil, fmt.Errorf("%w: unknown tool mode %q", ErrConfig, mode)
	}
}

// chooseMode resolves auto mode and returns the full definitions' tokens.
func chooseMode(t AutoThresholds, tools []toolcache.Tool) (Mode, int, error) {
	full, _ := BuildTools(ModeFull, tools)
	n, err := ToolTokens(full)
	if err != nil {
		return "", 0, err
	}
	return t.Choose(n), n, nil
}

func fullTool(t toolcache.Tool) llm.Tool {
	return llm.Tool{Name: t.Name, Description: t.Description, Parameters: parameters(t)}
}

func deferredTool(t toolcache.Tool) llm.Tool {
	return llm.Tool{Name: t.Name, Description: OneLine(t.Description), Parameters: permissiveSchema}
}

// parameters is the provider-ready schema of t, never empty or null.
func parameters(t toolcache.Tool) json.RawMessage {
	for _, p := range []json.RawMessage{t.Parameters, t.InputSchema} {
		p = bytes.TrimSpace(p)
		if len(p) > 0 && !bytes.Equal(p, []byte("null")) {
			return p
		}
	}
	return permissiveSchema
}

// OneLine shortens a description to its first sentence of its first
// non-empty line, at most 160 bytes: what deferred mode sends.
func OneLine(desc string) string {
	line := ""
	for l := range strings.SplitSeq(desc, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			line = l
			break
		}
	}
	// First sentence: a period followed by a space ends it (not "e.g. x").
	for off := 0; ; {
		i := strings.Index(line[off:], ". ")
		if i < 0 {
			break
		}
		end := off + i
		if !strings.HasSuffix(line[:end], "e.g") && !strings.HasSuffix(line[:end], "i.e") && !strings.HasSuffix(line[:end], "etc") {
			line = line[:end+1]
			break
		}
		off = end + 2
	}
	if len(line) > maxOneLineDescLength {
		cut := maxOneLineDescLength - len("…")
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		line = strings.TrimSpace(line[:cut]) + "…"
	}
	return line
}

// ToolTokens counts the o200k_base tokens of tools exactly as the llm
// client sends them (toolcache.CountToolTokens). The loop reports it in
// llm.request events and Usage; the tokens command prints it.
func ToolTokens(tools []llm.Tool) (int, error) {
	n, err := toolcache.CountToolTokens(tools)
	if err != nil {
		return 0, fmt.Errorf("agentloop: counting tool tokens: %w", err)
	}
	return n, nil
}

// tokenCache is the loop's memory of work derived from catalogs, shared by
// every job: token counts of tools arrays by their SHA-256 (a 527-tool
// catalog costs about 160 ms to count; see BenchmarkBuildAndCount), and
// whole prepared catalogs (see catalog) by catalog version.
type tokenCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]int
	// catalogs are by catalogKey; at most maxCatalogs, and only the newest
	// version of each selection.
	catalogs map[catalogKey]*catalogSlot
}

const (
	tokenCacheSize = 256
	maxCatalogs    = 64
)

func (c *tokenCache) count(tools []llm.Tool) (int, error) {
	b, err := llm.ToolsJSON(tools)
	if err != nil {
		return 0, fmt.Errorf("agentloop: encoding tools: %w", err)
	}
	if b == nil {
		return 0, nil
	}
	key := sha256.Sum256(b)
	c.mu.Lock()
	n, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return n, nil
	}
	if n, err = toolcache.CountTokens(string(b)); err != nil {
		return 0, fmt.Errorf("agentloop: %w", err)
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= tokenCacheSize {
		c.m = map[[sha256.Size]byte]int{} // crude bound: catalogs change rarely
	}
	c.m[key] = n
	c.mu.Unlock()
	return n, nil
}

// catalogKeyer is what a ToolSet offers when its tools are one selection
// of a versioned catalog (toolcache.View): jobs whose ToolSets give equal
// keys, and whose client tools and resource bridge agree, share one
// catalog, built once per catalog version.
type catalogKeyer interface {
	CatalogKey() (version uint64, selection string)
}

// catalogKey is what a job's catalog is made of.
type catalogKey struct {
	version   uint64
	selection string
	// client is a digest of the job's client tool declarations ("": none).
	client    string
	resources bool
}

// sameSelection is k without its version.
func (k catalogKey) sameSelection(o catalogKey) bool {
	return k.selection == o.selection && k.client == o.client && k.resources == o.resources
}

// catalog is a job's whole catalog and the work derived from it, read-only
// once built and shared by every job of the same catalogKey: the tools
// (MCP tools, then client tools, then the resource bridge), their registry
// entries (each compiles its validator once, on first use), the tools
// array of each mode and its token count, built on first use.
type catalog struct {
	tools []toolcache.Tool
	// own are the tools that are not the ToolSet's (client tools, the
	// resource bridge): a shared search index does not hold them.
	own    []toolcache.Tool
	byName map[string]*entry
	// clashes are the tool.clash events of a client tool a server tool
	// shadows: every job on the catalog emits them.
	clashes []map[string]any

	full, deferred, code modeTools
	codeOnce             sync.Once
	codeCat              *codemode.Catalog
}

// codeCatalog is the catalog's tools as code mode's functions, made once.
func (c *catalog) codeCatalog() *codemode.Catalog {
	c.codeOnce.Do(func() { c.codeCat = codeCatalog(c.tools) })
	return c.codeCat
}

// modeTools is one mode's tools array and its token count, made once.
type modeTools struct {
	mu    sync.Mutex
	done  bool
	tools []llm.Tool
	toks  int
	err   error
}

// get builds the array with build and counts it with count, once. A
// build or count that panics is this call's error and is not kept: with
// a sync.Once the array stayed nil, and every later job of the shared
// catalog was sent no tools, without an error.
func (m *modeTools) get(build func() []llm.Tool, count func([]llm.Tool) (int, error)) ([]llm.Tool, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.done {
		var tools []llm.Tool
		var toks int
		var err error
		if p := safely(func() {
			tools = build()
			toks, err = count(tools)
		}); p != nil {
			return nil, 0, p
		}
		m.tools, m.toks, m.err, m.done = tools, toks, err, true
	}
	return m.tools, m.toks, m.err
}

// safely runs f, returning its panic as an error (a *buildPanicError,
// which the job masks: maskBuildPanic).
func safely(f func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &buildPanicError{value: p}
		}
	}()
	f()
	return nil
}

// newCatalog starts an empty catalog.
func newCatalog() *catalog { return &catalog{byName: map[string]*entry{}} }

// add registers t; it reports false when the name is taken (first wins).
func (c *catalog) add(t toolcache.Tool, k toolKind) bool {
	if _, dup := c.byName[t.Name]; dup {
		return false
	}
	c.byName[t.Name] = &entry{tool: t, kind: k}
	c.tools = append(c.tools, t)
	if k != kindMCP {
		c.own = append(c.own, t)
	}
	return true
}

// fullTools is the full-mode array and its tokens.
func (c *catalog) fullTools(count func([]llm.Tool) (int, error)) ([]llm.Tool, int, error) {
	return c.full.get(func() []llm.Tool {
		out := make([]llm.Tool, len(c.tools))
		for i, t := range c.tools {
			out[i] = fullTool(t)
		}
		return out
	}, count)
}

// toolsFor is the tools array of mode and its tokens.
func (c *catalog) toolsFor(mode Mode, count func([]llm.Tool) (int, error)) ([]llm.Tool, int, error) {
	switch mode {
	case ModeFull:
		return c.fullTools(count)
	case ModeDeferred:
		return c.deferred.get(func() []llm.Tool {
			out := make([]llm.Tool, len(c.tools))
			for i, t := range c.tools {
				out[i] = deferredTool(t)
			}
			return out
		}, count)
	case ModeSearch:
		return searchTools()
	case ModeCode:
		return c.code.get(func() []llm.Tool { return codeModeTools(c.codeCatalog()) }, count)
	}
	tools, err := BuildTools(mode, c.tools) // the error of an unknown mode
	return tools, 0, err
}

// searchMode is search mode's fixed array, built and counted once.
var searchMode modeTools

func searchTools() ([]llm.Tool, int, error) {
	return searchMode.get(metaTools, ToolTokens)
}

// catalog returns the shared catalog of key, building it with build when
// there is none; jobs that ask for a key while it is built wait for that
// one build. A catalog whose build failed is not kept. The key's version is
// read before build lists the tools, so a catalog holds the tools of its
// version or of a newer one (what the ToolSet would list then anyway),
// never of an older one. A new version replaces the older ones of its
// selection.
func (c *tokenCache) catalog(key catalogKey, build func() (*catalog, error)) (*catalog, error) {
	c.mu.Lock()
	slot, ok := c.catalogs[key]
	if !ok {
		if c.catalogs == nil || len(c.catalogs) >= maxCatalogs {
			c.catalogs = map[catalogKey]*catalogSlot{} // crude bound: catalogs change rarely
		}
		for k := range c.catalogs {
			if k.sameSelection(key) && k.version < key.version {
				delete(c.catalogs, k)
			}
		}
		slot = &catalogSlot{}
		c.catalogs[key] = slot
	}
	c.mu.Unlock()
	slot.once.Do(func() {
		// A build that panics (a ToolSet's listing) is an error, and the
		// slot is not kept: the slot stayed, empty, and every later job of
		// the key got a nil catalog.
		if p := safely(func() { slot.cat, slot.err = build() }); p != nil {
			slot.cat, slot.err = nil, p
		}
	})
	if slot.err != nil {
		c.mu.Lock()
		if c.catalogs[key] == slot {
			delete(c.catalogs, key)
		}
		c.mu.Unlock()
	}
	return slot.cat, slot.err
}

// catalogSlot is one catalog, built once.
type catalogSlot struct {
	once sync.Once
	cat  *catalog
	err  error
}
