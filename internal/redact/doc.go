// Package redact keeps credentials out of text the worker shows: logs,
// errors, events, transcripts and what the model reads. A URL may carry
// them in its userinfo (a proxy's https://user:key@host/v1, an MCP server's
// https://token@host/mcp expanded from ${VAR}), in its path (a gateway's
// https://host/v1/sk-.../, a hosted MCP server's https://host/<token>/sse)
// or in its query (a hosted MCP server's https://host/mcp?api_key=..., a
// signed URL's X-Amz-Signature); URL replaces them. A path segment is
// taken for a key by its look (SecretSegment: a known key prefix, a UUID,
// a long run mixing letters and digits), so path words and model names
// stay readable. It works on the text, so a URL that
// does not parse, which url.Parse's own error would quote whole, is
// redacted as well. Secrets and Text take a URL's credentials out of any
// text that quotes it, however it is quoted (a transport's error).
package redact
