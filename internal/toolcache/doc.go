// Package toolcache is how workers reach MCP tools: a pool of long-lived MCP
// sessions and one registry of every tool they offer.
//
// Configuration is the mcpServers file users already have for Claude
// Desktop, Cursor or VS Code (see Config): stdio servers {command, args, env,
// cwd} and remote ones {url, headers, type: "http" | "sse"}, with ${VAR}
// expanded from the environment, plus per-server options (call timeout,
// concurrency limit, shared or per-job sessions, allow/deny globs, disabled).
// Jobs choose servers by name only; a job can never add a command or a URL.
//
// The Pool opens one session per server at start and keeps it: calls from
// every job are multiplexed on it up to MaxConcurrent in flight. A server
// that fails to start is reported by Status and retried with exponential
// backoff without holding up the others. A broken session (child exited,
// also while a process it started holds its stdout and stderr open,
// EOF, HTTP session expired with 404, Settings.HealthMisses health checks in
// a row unanswered while nothing else was heard from the server) is replaced
// in the background; the call that was in flight gets ErrSessionLost, the
// next call waits for the fresh session (a call refused with 404, or one
// still waiting for a free slot, is sent on it). Cancelling a call's context sends notifications/cancelled
// (on 2026-07-28 over HTTP, closing the request's stream is the
// cancellation). A call whose context carries WithProgress asks for
// progress (a progressToken) and gets the server's
// notifications/progress, masked, as they come. Close leaves no child process behind: each child runs in
// its own process group, which is killed after the graceful stdin close /
// SIGTERM, and Pdeathsig kills it if the worker dies first. A session that
// dies within seconds of connecting counts as a failed attempt (the first
// such death reconnects at once, later ones back off), so a server that
// exits after every handshake is not respawned in a loop.
//
// What a bad server can cost is bounded: list_changed re-reads at most twice
// a second however many notifications arrive; an HTTP response body is cut
// at 64 MiB (an event stream, per line), an HTTP error body at 2 KiB in
// the error and a JSON-RPC error's message at 8 KiB; a tool definition without a name, with an unusable schema (one
// whose "type" is not "object": providers refuse the whole request; one
// nested deeper than MaxSchemaDepth, or holding more than MaxSchemaObjects
// objects, which would take seconds to minutes to compile for validation)
// or that
// runs only as an MCP task (execution.taskSupport "required") is left out
// (and logged), not the server's whole list, and so is a second
// definition of a name in one list; a tools/call result
// mcp-go cannot decode (unknown content types, isError without content) is
// still given to the model; a line over 64 MiB that a stdio server writes
// (or a legacy SSE stream carries, once connected) is dropped and the
// request it answered fails with the bound, the session going on; one
// that does not end within 192 MiB more ends the session (stdio_proc.go).
// A stdio line or an event nested deeper than encoding/json decodes
// (10,000 levels), which mcp-go dropped without a word (the request it
// answered waiting for its deadline), is dropped the same way, the request
// failing at once saying why (nestbound.go); mcp-go fails a JSON body so
// nested itself. Either way a tools/list so nested fails the server's
// list, not one tool.
//
// The credentials a server's URL carries (userinfo, a query's api_key or
// token: redact.Secrets) are taken out of every error the pool returns and
// every line it logs: the transports quote URLs whole in their errors,
// which reach the model, events and transcripts.
//
// Sessions use mcp-go's client API (Initialize, ListTools, CallTool,
// resources, Ping/Discover, Listen); session_raw.go is the small part that
// reads JSON-RPC itself (verbatim tool schemas, error codes, cancellation
// over HTTP) and says why. The timings an operator may tune are Settings.
//
// Protocol: mcp-go v1.2.1 prefers protocol 2026-07-28, whose first request is
// a server/discover probe. A server that predates it and answers "method not
// found" (the npm reference servers 2026.8.31 do) costs one extra round trip;
// one that silently drops unknown requests costs the probe's 5 s timeout
// before mcp-go falls back to initialize. The pool offers 2025-11-25 (the
// newest version with the initialize handshake; a server's config may pin an
// older one), sends no probe, and so connects to every current server on the
// handshake alone. docs/BENCHMARKS.md has the measurements. A server whose
// config says "protocol": "2026-07-28" (gateways that accept only the
// sessionless protocol) is spoken to in that version only: server/discover,
// no session, list_changed on a subscriptions/listen stream, health checks
// with server/discover (2026-07-28 has no ping).
//
// The Registry is one catalog across servers, read by the agent loop. Each
// Tool keeps the server's name (Original), the verbatim input schema (for
// validation) and a normalised copy (Parameters: no $schema, always
// "type":"object") for providers. Names follow OpenAI's
// ^[a-zA-Z0-9_-]{1,64}$: accents are dropped and a few Latin letters
// spelled out (Café_crème is Cafe_creme), other ASCII characters become
// '_', a name with characters of no ASCII form (CJK, Cyrillic) keeps its
// ASCII part with a hash of the whole name (查询天气 is tool_ and 8 hex
// digits), long names are cut with a hash suffix, and a name offered by more than one server becomes
// server__tool for each of them, so the outcome does not depend on which
// server connected first. notifications/tools/list_changed makes the pool
// re-read that server's list at once, and a slow timer re-reads all lists;
// OnChange fires when the catalog actually changed. Registry.Search is BM25
// over the words of names, descriptions and parameter names.
//
// A View is one job's window on the pool: the servers it named, its
// allow/deny globs, and its own sessions for servers in per-job mode. A
// tool renamed while a job runs (another server announced a tool of the
// same name, so both became server__tool) is still called by the name the
// job was offered.
//
// CountToolTokens counts what a tools array costs (o200k_base, offline), and
// LoadCatalog reads captured tools/list catalogs for measurements without
// connecting.
package toolcache
