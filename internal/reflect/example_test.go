package reflect_test

import (
	"encoding/json"
	"fmt"

	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/reflect"
)

func ExampleRewrite() {
	// What the model saw: it reached read_file through the call_tool meta tool.
	raw := []llm.Message{
		{Role: llm.RoleUser, Content: "What is in /notes.txt?"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{
			ID: "call_1", Type: "function",
			Function: llm.FunctionCall{Name: "call_tool", Arguments: `{"name":"read_file","arguments":{"path":"/notes.txt"}}`},
		}}},
		{Role: llm.RoleTool, ToolCallID: "call_1", Content: "buy milk"},
	}
	// What the loop recorded while dispatching it.
	out := "buy milk"
	recs := []reflect.Record{{
		ID: "call_1.1", CallID: "call_1", Kind: reflect.KindCallTool,
		Name: "read_file", Input: json.RawMessage(`{"path":"/notes.txt"}`), Output: &out,
	}}
	for _, m := range reflect.Rewrite(raw, recs) {
		for _, c := range m.ToolCalls {
			fmt.Printf("%s calls %s %s (id %s)\n", m.Role, c.Function.Name, c.Function.Arguments, c.ID)
		}
		if m.Role == llm.RoleTool {
			fmt.Printf("%s %s answers %s: %s\n", m.Role, m.Name, m.ToolCallID, m.Content)
		}
	}
	// Output:
	// assistant calls read_file {"path":"/notes.txt"} (id call_1.1)
	// tool read_file answers call_1.1: buy milk
}
