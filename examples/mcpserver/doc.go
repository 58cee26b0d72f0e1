// Command mcpserver is a small, self-contained MCP server bundled with
// jetagent for `make demo` and for end-to-end tests. It needs nothing but Go.
//
//	mcpserver                        # serve over stdio (the default)
//	mcpserver -http 127.0.0.1:8080   # serve Streamable HTTP at http://127.0.0.1:8080/mcp
//	mcpserver -sse 127.0.0.1:8081    # serve the legacy HTTP+SSE transport at /sse
//
// With -http or -sse, the address may use port 0; the server prints the URL it
// listens on to stderr ("mcpserver: listening on URL"), so a test can read it.
//
// Its tools have real input schemas (required fields, enums, nested objects,
// arrays) and deterministic results:
//
//   - add {a, b: number}: the sum.
//   - get_weather {city, unit?: celsius|fahrenheit}: fake weather derived from
//     the city name, with structured output and an output schema.
//   - search_notes {query, limit?, filter?: {tags: [string], match: any|all}}.
//   - create_note {title, body, tags?: [string]}.
//   - delete_note {id}: listed only while a note exists. Creating the first
//     note and deleting the last one change the tool list, so the server
//     sends notifications/tools/list_changed (the tools capability declares
//     listChanged).
//   - slow {ms: integer}: sleeps, returning early with an error when the
//     request is cancelled, for cancellation and timeout tests.
//
// The resource notes://index is a JSON list of the notes. Notes live in
// memory and are lost when the process ends.
package main
