package toolcache

import (
	"encoding/json"
	"fmt"
	"os"
)

// LoadCatalog reads a captured tools/list catalog — {"server": ..., "tools":
// [...]}, optionally with a parallel "tool_server" array naming each tool's
// server (aggregated catalogs) — into Tools, without connecting. Names are
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
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return "", nil, err
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
