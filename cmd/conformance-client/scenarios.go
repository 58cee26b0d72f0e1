package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// A scenario does what one conformance scenario expects of a client; the
// test server does the checking.
type scenario func(ctx context.Context, e *env) error

// scenarios maps the exact MCP_CONFORMANCE_SCENARIO names to their handlers.
var scenarios = map[string]scenario{
	"initialize":                          initializeOnly,
	"tools_call":                          callTool("add_numbers", map[string]any{"a": 5, "b": 3}),
	"sse-retry":                           callTool("test_reconnection", map[string]any{}),
	"elicitation-sep1034-client-defaults": elicitationDefaults,
}

func init() {
	// The auth scenarios all end the same way once authorised.
	for _, name := range authScenarios {
		scenarios[name] = authorizedToolCall
	}
}

// clientInfo identifies this client; the initialize check requires name and version.
var clientInfo = mcp.Implementation{Name: "jetagent-conformance-client", Version: "0.1.0"}

// connect opens a Streamable HTTP session and performs the initialize
// handshake. The protocol is pinned to 2025-11-25: the suite's servers predate
// 2026-07-28, and without the pin mcp-go first probes server/discover.
func connect(ctx context.Context, e *env, topts []transport.StreamableHTTPCOption, copts ...client.ClientOption) (*client.Client, error) {
	topts = append([]transport.StreamableHTTPCOption{transport.WithHTTPLogger(e.log)}, topts...)
	tr, err := transport.NewStreamableHTTP(e.url, topts...)
	if err != nil {
		return nil, fmt.Errorf("transport: %w", err)
	}
	copts = append([]client.ClientOption{client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION)}, copts...)
	c := client.NewClient(tr, copts...)
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	if err := initialize(ctx, c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func initialize(ctx context.Context, c *client.Client) error {
	req := mcp.InitializeRequest{}
	req.Params.ClientInfo = clientInfo
	if _, err := c.Initialize(ctx, req); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	return nil
}

func initializeOnly(ctx context.Context, e *env) error {
	c, err := connect(ctx, e, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	return nil
}

// callTool lists the tools, checks that name is among them, and calls it.
func callTool(name string, args map[string]any) scenario {
	return func(ctx context.Context, e *env) error {
		c, err := connect(ctx, e, nil)
		if err != nil {
			return err
		}
		defer c.Close()
		return listAndCall(ctx, e, c, name, args)
	}
}

func listAndCall(ctx context.Context, e *env, c *client.Client, name string, args map[string]any) error {
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	found := false
	for _, t := range tools.Tools {
		found = found || t.Name == name
	}
	if !found {
		return fmt.Errorf("server does not list tool %q", name)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return fmt.Errorf("tools/call %s: %w", name, err)
	}
	if res.IsError {
		return fmt.Errorf("tools/call %s: tool error: %v", name, res.Content)
	}
	e.log.Info("tool result", "tool", name, "content", res.Content)
	return nil
}

func elicitationDefaults(ctx context.Context, e *env) error {
	// The SDK test server sends elicitation/create on the standalone GET
	// stream, which mcp-go opens only when asked to listen.
	//nolint:staticcheck // SA1019: the legacy protocol's GET stream is what the suite sends elicitation on
	c, err := connect(ctx, e, []transport.StreamableHTTPCOption{transport.WithContinuousListening()},
		client.WithElicitationHandler(defaultsElicitor{}))
	if err != nil {
		return err
	}
	defer c.Close()
	return listAndCall(ctx, e, c, "test_client_elicitation_defaults", map[string]any{})
}

// defaultsElicitor accepts every form elicitation, answering each field with
// the default its schema declares (SEP-1034), as a form left untouched would.
type defaultsElicitor struct{}

func (defaultsElicitor) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	schema, ok := req.Params.RequestedSchema.(map[string]any)
	if !ok {
		return nil, errors.New("elicitation: requestedSchema is not an object")
	}
	content := map[string]any{}
	props, _ := schema["properties"].(map[string]any)
	for name, p := range props {
		prop, _ := p.(map[string]any)
		if def, ok := prop["default"]; ok {
			content[name] = def
		}
	}
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action:  mcp.ElicitationResponseActionAccept,
		Content: content,
	}}, nil
}
