// Package redact keeps credentials out of text the worker shows: logs,
// errors, events, transcripts and what the model reads. A URL may carry
// them in its userinfo (a proxy's https://user:key@host/v1, an MCP server's
// https://token@host/mcp expanded from ${VAR}); URL replaces them. It works
// on the text, so a URL that does not parse, which url.Parse's own error
// would quote whole, is redacted as well.
package redact
