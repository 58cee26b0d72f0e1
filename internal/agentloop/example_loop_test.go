package agentloop_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// Loop.Run against the scripted model and an in-process MCP server: the
// model calls add, sees its result, and answers.
func ExampleLoop_Run() {
	ctx := context.Background()

	// An MCP server with one tool, reached through the pool.
	mcpSrv := server.NewMCPServer("calculator", "1.0.0", server.WithToolCapabilities(true))
	mcpSrv.AddTool(mcp.NewToolWithRawSchema("add", "Add two integers.",
		json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}`)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(fmt.Sprint(req.GetInt("a", 0) + req.GetInt("b", 0))), nil
		})
	pool, err := toolcache.NewPool(ctx, toolcache.Config{},
		toolcache.WithInProcessServer("calc", mcpSrv, toolcache.ServerConfig{}))
	if err != nil {
		panic(err)
	}
	defer pool.Close() //nolint:errcheck // example
	view, err := pool.View("job-1", nil, nil, nil)
	if err != nil {
		panic(err)
	}
	defer view.Close() //nolint:errcheck // example

	// The scripted model: call add, then answer with what it returned.
	model, err := llmtest.Start(llmtest.Script{Handler: func(req llmtest.RecordedRequest) llmtest.Reply {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == llm.RoleTool {
			return llmtest.Reply{Content: "2 + 3 = " + last.Content}
		}
		return llmtest.Reply{ToolCalls: []llm.ToolCall{{Function: llm.FunctionCall{Name: "add", Arguments: `{"a":2,"b":3}`}}}}
	}})
	if err != nil {
		panic(err)
	}
	defer model.Close()
	client, err := llm.New(llm.Config{BaseURL: model.URL(), Model: "scripted"})
	if err != nil {
		panic(err)
	}

	loop, err := agentloop.New(agentloop.Config{LLM: client, DefaultSystem: "You add numbers."})
	if err != nil {
		panic(err)
	}
	res, err := loop.Run(ctx, agentloop.Input{JobID: "job-1", Task: "What is 2 + 3?", Tools: view})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Answer)
	fmt.Println(res.Mode, res.StopReason, len(res.Messages), "messages")
	// Output:
	// 2 + 3 = 5
	// full final_answer 5 messages
}
