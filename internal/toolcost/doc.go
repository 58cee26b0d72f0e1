// Package toolcost measures what a tool catalog costs the model: the tokens
// of the tools array of one request in each tool mode, built by the agent
// loop's own code (agentloop.BuildTools, agentloop.ToolTokens), so the
// figures are what a job would really send, not an estimate made beside it.
//
// The worker's `tokens` subcommand runs it on captured catalog files and its
// `tools` subcommand on the live MCP servers of the configuration.
package toolcost
