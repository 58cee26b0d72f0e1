//go:build !unix

package toolcache

// jetagent runs stdio MCP servers in process groups and signals them with
// kill(2): it builds for Linux and macOS (and other Unix systems) only.
// This undefined name makes a build elsewhere say so.
var _ = jetagent_builds_for_unix_systems_only
