// Package agentloop runs one agent job: rounds of chat-completions requests
// against an OpenAI-compatible model, with the job's tools dispatched,
// validated and accounted for, sending the model as little tool text as
// possible without losing accuracy.
//
// # Tool modes
//
// A job's catalog is its MCP tools (a [ToolSet], the registry's view), then
// its client tools (a server tool wins a name clash: tool.clash event), then
// the resource bridge (mcp_list_resources, mcp_read_resource) when the
// servers list any resource. The mode decides what the tools array shows:
//
//   - full: every tool with its whole schema (the baseline).
//   - deferred: name, one-line description and {"type":"object"}.
//   - search: three fixed meta tools, search_tools(query, limit),
//     get_tool_details(name) and call_tool(name, arguments); the array is
//     byte-identical in every request, whatever the catalog (prompt caches
//     keep working).
//   - code: execute_code(code), with a compact index of the catalog in its
//     description, plus search_tools and get_tool_details (which answers
//     TypeScript signatures). The model writes JavaScript that calls the
//     tools as async functions (internal/codemode); each inner call is
//     checked, journaled, published and recorded like a direct one, and
//     a re-run script gets the recorded results (the journal's keys
//     c<round>.<index>.<n>, Date.now and Math.random recorded too); the
//     re-run of an execution that completed makes no call it did not
//     make and gives the result the model read (c<round>.<index>.end).
//   - auto: full, deferred or search by the o200k_base token cost of the
//     full definitions against [AutoThresholds]; code above CodeAbove
//     when an operator sets it.
//
// [BuildTools] is the one function that builds the array, used by the loop
// and by the tokens command alike.
//
// # Validation and the ephemeral retry
//
// Every call — direct, through call_tool, to a client tool or to the
// resource bridge — is validated against the tool's verbatim input schema
// (santhosh-tekuri/jsonschema, compiled once per job and tool). When a reply
// holds invalid calls, the loop sends the same request again with a note
// stating the errors and the failing tools' full schemas (in deferred mode
// the failing tools' definitions in the array are also replaced by their
// full ones, a description over maxQuotedSchema keeping its one line;
// search mode keeps its array untouched; a schema over maxQuotedSchema is
// named, not given). The rejected reply
// never enters history. After Config.SchemaRetries retries the calls still
// invalid get the errors as their tool results. Arguments that are not a
// JSON object, and unknown tool names (answered with the closest names,
// and the job's servers that are down with no tools listed, whose tools
// may be the one meant), go back as error results at once.
//
// # Rounds
//
// A round is one accepted reply and the execution of its calls, which run
// concurrently (Config.MaxParallelCalls) with results appended in call
// order. A call that panics inside the worker (its tool's session, the
// client-tool caller, a meta tool) fails alone, with the panic's value as
// its result and journaled as a failed call, its stack in Config.Logger:
// the process and the round's other calls go on. When max_rounds rounds are used up, a last request without tools
// asks for the final answer (tool calls in that reply are dropped; a reply
// with nothing else is asked again once); a server that refuses it because
// the history holds tool calls (LiteLLM for Anthropic and Bedrock) gets it
// with the tools and tool_choice "none". A server that refuses the loop's
// notes (user messages) right after tool results, as Mistral's format
// does, gets each appended to the tool result before it instead; one whose
// template takes one call a turn (Llama 3's) gets parallel calls as one
// turn each, and one that takes only Mistral's call ids (9 letters or
// digits) gets the others replaced, in that request and every later one.
// A server that refuses a request over the model's context window (vLLM,
// llama.cpp, OpenAI's context_length_exceeded, ...) gets it again with
// the tool outputs the model already read cut, a level at a time (earlier
// rounds' to 256 bytes, then to none, then the last round's to 2 KiB),
// each cut saying so, in that request and every later one, with a
// context.compacted event (compact.go).
// Only the request changes: history keeps what happened. Tool calls that a model writes into its
// content (Hermes/Qwen <tool_call>, Llama <function=...>, Mistral
// [TOOL_CALLS], fenced or bare JSON) are recognised, and near misses of
// them (damaged tags, broken braces or quotes, Python-style and ReAct
// calls) recovered when they name a job's tool with valid arguments; in
// code mode a fenced JavaScript block calling a tool of the job (await
// tools.NAME(...)) runs as an execute_code call; an
// answer that looks like a failed call is asked again once, ephemerally,
// and fails the job with [ErrMalformedCall] if the reply is debris too
// (Config.ContentCalls sets this per model); Groq's refusal of a reply
// whose call it could not read (400 tool_use_failed) is taken as that
// reply (its failed_generation), asked again once when no call can be
// read from it, like Gemini's MALFORMED_FUNCTION_CALL. An empty reply is
// nudged once; a provider refusal ends the job with [ErrRefused], a reply
// cut off at the token limit with no tool call with [ErrTruncated], a
// finish reason of error or abort with [ErrReplyAbandoned]; each names the
// model. Leading <think> blocks and Harmony's analysis channel are not
// part of an answer. Tool names in another spelling ("functions.x", a
// server prefix, Claude Code's mcp__server__x, another case, '-' for '_',
// Harmony's channel after the name) are mapped onto the one tool they fit,
// in calls and in get_tool_details, "null", fenced or twice-encoded
// arguments unwrapped, and a call repeated under one id in a reply run
// once; the transcript shows the call as it ran (arguments that are not
// one JSON object as {}, the servers' templates parse them), with the
// reasoning the server sent beside it (an answer's is dropped). Tool
// output above Config.MaxToolOutput is truncated for the model with a note;
// the tool.result event carries all of it. search_tools and
// get_tool_details answer JSON within that limit instead (cut, it was not
// valid): the hits that fit, and a tool's details shortened to a summary
// of its top-level parameters (calls are still validated against the
// full schema; in code mode, TypeScript declarations over the limit give
// way to that summary too).
//
// # Events, records, checkpoints
//
// Every step is an [Event] to the job's [Sink]. Calls made through
// call_tool and client tools are returned as reflect.Records so the stored
// transcript can show the real calls. After each round the [State] goes to
// the job's [CheckpointStore]; Run with Input.Resume continues from it
// without asking the model again for the rounds it holds.
package agentloop
