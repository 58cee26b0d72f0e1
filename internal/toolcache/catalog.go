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

// ParseCatalog is LoadCatalog on bytes.
func ParseCatalog(data []byte) (server string, tools []Tool, err error) {
	var c struct {
		Server     string            `json:"server"`
		Tools      []json.RawMessage `json:"tools"`
		ToolServer []string          `json:"tool_server"`
		Result     *struct {
			Tools []json.RawMessage `json:"tools"`
		} `json:"result"`
	}
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
		if err := json.Unmarshal(data, &c.Tools); err != nil {
			return "", nil, err
		}
	} else if err := json.Unmarshal(data, &c); err != nil {
		return "", nil, err
	}
	if c.Tools == nil && c.Result != nil {
		c.Tools = c.Result.Tools
	}
	if c.Tools == nil {
		// Most likely the wrong file: say so rather than index nothing.
		return "", nil, errors.New(`no "tools" array: want {"server": ..., "tools": [...]}, a tools/list result or an array of tools`)
	}
	if c.ToolServer != nil && len(c.ToolServer) != len(c.Tools) {
		return "", nil, fmt.Errorf("tool_server has %d entries for %d tools", len(c.ToolServer), len(c.Tools))
	}
	tools = make([]Tool, 0, len(c.Tools))
	for i, raw := range c.Tools {
		owner := c.Server
		if c.ToolServer != nil {
			owner = c.ToolServer[i]
		}
		t, err := toolFromRaw(owner, raw)
		if err != nil {
			return "", nil, fmt.Errorf("tools[%d]: %w", i, err)
		}
		tools = append(tools, t)
	}
	return c.Server, tools, nil
}
