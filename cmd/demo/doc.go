// Command demo runs one jetagent job end to end on the embedded NATS
// default, using the real binaries a user would run:
//
//  1. bin/worker, with an embedded nats-server (JetStream store in a
//     temporary directory) and the bundled example MCP server
//     (bin/mcpserver, over stdio) as its only MCP server;
//  2. bin/submit, which publishes a task, follows its events live and
//     prints the final answer;
//  3. bin/submit transcript, which prints the stored (reflected) transcript.
//
// The model is the one set by OPENAI_BASE_URL, OPENAI_API_KEY and
// OPENAI_MODEL. Without OPENAI_BASE_URL the demo starts jetagent's scripted
// model (internal/llm/llmtest): an OpenAI-compatible server that follows a
// fixed script — it calls the weather and add tools, then answers from their
// results — and says so loudly, since no real model is involved.
//
// Run it with `make demo`, which builds the binaries first.
package main
