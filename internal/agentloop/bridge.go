package agentloop

import "github.com/jetagent/jetagent/internal/toolcache"

// ResourceBridge is the tools the loop adds to a job's catalog when its
// MCP servers list any resource (mcp_list_resources, mcp_read_resource),
// so what a catalog costs (worker tools) can count what a job is sent.
func ResourceBridge() []toolcache.Tool { return resourceTools() }
