// Command worker runs jetagent jobs: it takes jobs from NATS JetStream
// (agent.jobs.<queue>), runs each with the agent loop against the
// operator's MCP servers and an OpenAI-compatible model, publishes every
// step as an event and stores the transcript.
//
// With NATS_URL unset it starts an embedded nats-server with JetStream
// (store in JETAGENT_DATA_DIR, clients on JETAGENT_LISTEN, 127.0.0.1:4222 by
// default), so `submit` and the `nats` CLI work with no set-up. With
// NATS_URL set it joins an external server or cluster (NATS_USER /
// NATS_PASSWORD, NATS_TOKEN, NATS_CREDS, NATS_CA / NATS_CERT / NATS_KEY);
// JETAGENT_REPLICAS sets stream replicas there. Start more workers, on any
// machine, to add capacity: they share one durable consumer per queue.
//
// All configuration is environment variables; `worker --help` lists each
// with its default and meaning, and a bad value stops the worker at start
// with a message naming the variable.
//
// Subcommands `tokens` and `tools` print the tool-definition token cost of
// a catalog per tool mode (package toolcost).
package main
