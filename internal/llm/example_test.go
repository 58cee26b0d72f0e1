package llm_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// A client against the scripted model: the first reply is rate limited, the
// client retries after the provider's Retry-After, then gets a tool call.
func ExampleClient_Complete() {
	model, err := llmtest.Start(llmtest.Script{Replies: []llmtest.Reply{
		{Status: 429, Content: "slow down", Header: map[string]string{"Retry-After": "0"}},
		{ToolCalls: []llm.ToolCall{{Function: llm.FunctionCall{Name: "get_weather", Arguments: `{"city":"Oslo"}`}}}},
	}})
	if err != nil {
		panic(err)
	}
	defer model.Close()

	client, err := llm.New(llm.Config{BaseURL: model.URL(), APIKey: "sk-demo", Model: "demo-model"})
	if err != nil {
		panic(err)
	}
	resp, err := client.Complete(context.Background(), llm.Request{
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Weather in Oslo?"}},
		Tools: []llm.Tool{{
			Name:        "get_weather",
			Description: "Current weather for a city.",
			Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
		}},
	})
	if err != nil {
		panic(err)
	}
	call := resp.Message.ToolCalls[0]
	fmt.Println(resp.FinishReason, call.ID, call.Function.Name, call.Function.Arguments)

	reqs := model.Requests()
	fmt.Println("requests:", len(reqs))
	fmt.Println("model sent:", reqs[1].Model)
	fmt.Println("tools sent:", string(reqs[1].ToolsJSON))
	// Output:
	// tool_calls call_2_0 get_weather {"city":"Oslo"}
	// requests: 2
	// model sent: demo-model
	// tools sent: [{"type":"function","function":{"name":"get_weather","description":"Current weather for a city.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]
}
