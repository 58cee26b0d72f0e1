// Command conformance-client is the MCP client that the
// @modelcontextprotocol/conformance suite drives to check that mcp-go, as
// jetagent uses it, speaks the protocol correctly.
//
// The suite starts a test server per scenario and runs
//
//	conformance-client <server URL>
//
// with MCP_CONFORMANCE_SCENARIO naming the scenario (and, for a few auth
// scenarios, MCP_CONFORMANCE_CONTEXT holding JSON credentials). The client
// connects over Streamable HTTP, does what the scenario expects, and exits 0;
// the suite's test server judges the wire traffic. Each scenario is a function
// in the scenarios map, so an unknown name fails loudly instead of silently
// passing. conformance/run.sh builds this command and runs the suite; scenarios
// that mcp-go cannot pass are listed, with reasons, in conformance/baseline.yml.
package main
