package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// scripted is the demo's model: first it calls get_weather and add (directly
// when the tools are offered by name, through call_tool in search mode),
// then it answers from the tool results it was sent.
func scripted(req llmtest.RecordedRequest) llmtest.Reply {
	last := len(req.Messages) - 1
	for last >= 0 && req.Messages[last].Role != llm.RoleUser {
		last--
	}
	var results []string
	for _, m := range req.Messages[last+1:] {
		if m.Role == llm.RoleTool {
			results = append(results, strings.TrimSpace(m.Content))
		}
	}
	if len(results) > 0 || len(req.Tools) == 0 {
		return llmtest.Reply{Content: "Here is what the tools told me:\n- " + strings.Join(results, "\n- ") +
			"\n(Answer written by the scripted demo model.)"}
	}
	calls := []struct {
		name string
		args string
	}{
		{"get_weather", `{"city":"Lisbon","unit":"celsius"}`},
		{"add", `{"a":19.5,"b":22.5}`},
	}
	offered := func(name string) bool {
		return slices.ContainsFunc(req.Tools, func(t llm.Tool) bool { return t.Name == name })
	}
	var out []llm.ToolCall
	for i, c := range calls {
		fn := llm.FunctionCall{Name: c.name, Arguments: c.args}
		if !offered(c.name) && offered("call_tool") {
			args, _ := json.Marshal(map[string]any{"name": c.name, "arguments": json.RawMessage(c.args)})
			fn = llm.FunctionCall{Name: "call_tool", Arguments: string(args)}
		}
		out = append(out, llm.ToolCall{ID: fmt.Sprintf("call_demo_%d", i+1), Type: "function", Function: fn})
	}
	return llmtest.Reply{ToolCalls: out}
}
