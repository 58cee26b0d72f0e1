// Package llmtest is a scripted OpenAI-compatible chat-completions server.
//
// It is the only fake in jetagent's tests: everything else (NATS, MCP servers)
// is real, and the model is replaced by this server so tests are
// deterministic. The server answers POST /v1/chat/completions with the next
// scripted [Reply] (or a dynamic handler set with [Server.Handle]) as a proper
// chat.completion JSON, and records every request it receives — raw body,
// decoded messages and tools, the exact "tools" JSON, headers — so tests
// assert on what the client really sent over HTTP.
//
// A Reply with a non-200 Status becomes an OpenAI-style error body (with
// optional headers such as Retry-After), which drives the client's retry
// paths. When nothing is scripted the server answers 500 naming the request
// number, so an unexpected extra request fails the test loudly.
//
// In tests use [NewServer]; it closes on t.Cleanup. Outside tests (the demo
// runs against a scripted model when no OPENAI_* endpoint is configured) use
// [Start] and [Server.Close]. [Server.URL] is the base URL including "/v1",
// the form OpenAI clients expect.
package llmtest
