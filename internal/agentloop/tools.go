package agentloop

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

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
		return nil, fmt.Errorf("%w: %s", ErrModeNotImplemented, mode)
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

// tokenCache remembers token counts of tools arrays by their SHA-256, so
// jobs on the same catalog do not tokenise it again (a 527-tool catalog
// costs about 160 ms to count; see BenchmarkBuildAndCount).
type tokenCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]int
}

const tokenCacheSize = 256

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
