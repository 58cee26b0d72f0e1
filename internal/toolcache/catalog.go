package toolcache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// LoadCatalog reads a captured tools/list catalog — {"server": ..., "tools":
// [...]}, optionally with a parallel "tool_server" array naming each tool's
// server (aggregated catalogs); also a bare tools/list result ({"tools":
// [...]}), the JSON-RPC response around one ({"result": {"tools": [...]}})
// or a plain array of tools — into Tools, without connecting. Names are
// the servers' own; build a Registry with NewRegistry to get model-facing
// names.
func LoadCatalog(path string) (server string, tools []Tool, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("toolcache: read catalog: %w", err)
	}
	server, tools, err = ParseCatalog(data)
	if err != nil {
		return "", nil, fmt.Errorf("toolcache: catalog %s: %w", path, err)
	}
	return server, tools, nil
}

// LoadCatalogAsServed is LoadCatalog as the pool takes a server's
// tools/list: a definition it cannot use (no name, a schema that is not an
// object, a tool that runs only as an MCP task) and a name a server gives again are left out and reported in
// skipped, rather than refusing the file; the first definition of a name
// is kept. search-eval and the tokens command read catalogs so, to measure
// what the loop would index.
func LoadCatalogAsServed(path string) (server string, tools []Tool, skipped []error, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, nil, fmt.Errorf("toolcache: read catalog: %w", err)
	}
	server, tools, skipped, err = parseCatalog(data, true)
	if err != nil {
		return "", nil, nil, fmt.Errorf("toolcache: catalog %s: %w", path, err)
	}
	return server, tools, skipped, nil
}

// ParseCatalog is LoadCatalog on bytes.
func ParseCatalog(data []byte) (server string, tools []Tool, err error) {
	server, tools, _, err = parseCatalog(data, false)
	return server, tools, err
}

// parseCatalog reads a catalog; served says to skip what the pool would
// (LoadCatalogAsServed) instead of failing.
func parseCatalog(data []byte, served bool) (server string, tools []Tool, skipped []error, err error) {
	var c struct {
		Server     string            `json:"server"`
		Tools      []json.RawMessage `json:"tools"`
		ToolServer []string          `json:"tool_server"`
		Result     *struct {
			Tools []json.RawMessage `json:"tools"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	// A byte order mark, as some editors (and PowerShell's redirection)
	// write: it was refused as "invalid character 'ï' looking for
	// beginning of value".
	data = bytes.TrimPrefix(data, utf8BOM)
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
		if err := json.Unmarshal(data, &c.Tools); err != nil {
			return "", nil, nil, err
		}
	} else if err := json.Unmarshal(data, &c); err != nil {
		return "", nil, nil, err
	}
	if c.Tools == nil && c.Result != nil {
		c.Tools = c.Result.Tools
	}
	if c.Tools == nil && c.Error != nil {
		// A captured failure said only that there was no "tools" array.
		return "", nil, nil, fmt.Errorf("a JSON-RPC error response (code %d: %q), not a tools/list result", c.Error.Code, c.Error.Message)
	}
	if c.Tools == nil {
		// Most likely the wrong file: say so rather than index nothing.
		return "", nil, nil, errors.New(`no "tools" array: want {"server": ..., "tools": [...]}, a tools/list result or an array of tools`)
	}
	if c.ToolServer != nil && len(c.ToolServer) != len(c.Tools) {
		return "", nil, nil, fmt.Errorf("tool_server has %d entries for %d tools", len(c.ToolServer), len(c.Tools))
	}
	tools = make([]Tool, 0, len(c.Tools))
	seen := map[[2]string]bool{}
	for i, raw := range c.Tools {
		owner := c.Server
		if c.ToolServer != nil {
			owner = c.ToolServer[i]
		}
		t, err := toolFromRaw(owner, raw)
		if err == nil && served {
			err = servable(raw)
		}
		switch {
		case err != nil && served:
			skipped = append(skipped, fmt.Errorf("tools[%d]: %w", i, err))
			continue
		case err != nil:
			return "", nil, nil, fmt.Errorf("tools[%d]: %w", i, err)
		case served && seen[[2]string{owner, t.Original}]:
			skipped = append(skipped, fmt.Errorf("tools[%d]: tool %q: its server gave that name before", i, t.Original))
			continue
		}
		seen[[2]string{owner, t.Original}] = true
		tools = append(tools, t)
	}
	return c.Server, tools, skipped, nil
}
