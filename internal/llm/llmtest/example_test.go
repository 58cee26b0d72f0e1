package llmtest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// A scripted model answers with a tool call, then with text, and records what
// it was sent. In tests, prefer llmtest.NewServer(t, replies...).
func Example() {
	s, err := llmtest.Start(llmtest.Script{Replies: []llmtest.Reply{
		{ToolCalls: []llm.ToolCall{{Function: llm.FunctionCall{Name: "get_weather", Arguments: `{"city":"Oslo"}`}}}},
		{Content: "It is sunny in Oslo."},
	}})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	for range 2 {
		resp, err := http.Post(s.URL()+"/chat/completions", "application/json",
			strings.NewReader(`{"model":"demo","messages":[{"role":"user","content":"Weather in Oslo?"}]}`))
		if err != nil {
			panic(err)
		}
		var out struct {
			Choices []struct {
				Message      llm.Message `json:"message"`
				FinishReason string      `json:"finish_reason"`
			} `json:"choices"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		c := out.Choices[0]
		fmt.Printf("%s: %q %v\n", c.FinishReason, c.Message.Content, c.Message.ToolCalls)
	}
	for _, r := range s.Requests() {
		fmt.Println(r.N, r.Model, r.Messages[0].Content)
	}
	// Output:
	// tool_calls: "" [{call_1_0 function {get_weather {"city":"Oslo"}} []}]
	// stop: "It is sunny in Oslo." []
	// 1 demo Weather in Oslo?
	// 2 demo Weather in Oslo?
}
