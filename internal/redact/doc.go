// Package redact keeps credentials out of text the worker shows: logs,
// errors, events, transcripts and what the model reads. A URL may carry
// them in its userinfo (a proxy's https://user:key@host/v1, an MCP
// server's https://token@host/mcp expanded from ${VAR}), in a host label
// (a tunnel's https://<token>.example.io), in its path (a gateway's
// https://host/v1/sk-.../, a hosted MCP server's https://host/<token>/sse),
// in its query (a hosted MCP server's https://host/mcp?api_key=..., a
// signed URL's X-Amz-Signature) or in its fragment (an OAuth callback's
// #access_token=...); URL replaces them. A path segment or host label is
// taken for a key by its look (SecretSegment: a known key prefix, a UUID,
// a long run mixing letters and digits, also when '-' and '_' split it),
// so path words, hostnames and model names stay readable. It works on
// the text, in time linear in its length, so a URL that does not parse,
// which url.Parse's own error would quote whole, is redacted as well.
// Secrets and Text take a URL's credentials out of any text that quotes
// it, however it is quoted (a transport's error).
package redact
