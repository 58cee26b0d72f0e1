package agentloop_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// strictHistory answers as Ollama, vLLM and llama.cpp do: a request whose
// history holds a call whose arguments are not one JSON object is refused
// with 400 "invalid tool call arguments"; any other gets answer.
func strictHistory(answer string) func(llmtest.RecordedRequest) llmtest.Reply {
	return func(r llmtest.RecordedRequest) llmtest.Reply {
		for _, m := range r.Messages {
			for _, c := range m.ToolCalls {
				var args map[string]any
				if json.Unmarshal([]byte(c.Function.Arguments), &args) != nil {
					return llmtest.Reply{Status: 400, Content: "invalid tool call arguments"}
				}
			}
		}
		return textReply(answer)
	}
}

// A call whose arguments are not one JSON object goes into history with {}
// in their place, and its result quotes what the model wrote. Before: the
// text went back as it came, and the next request to Ollama, vLLM or
// llama.cpp was refused ("provider returned 400: invalid tool call
// arguments"), failing the job one round after the call: also a
// parameterless call with blank arguments, which had run.
func TestHistoryArgumentsAreObjects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, tool, args string
		finish           string // default tool_calls
		// wantServerCalls reaching the MCP server; wantResult the start of
		// the call's result.
		wantServerCalls int
		wantResult      string
	}{
		{name: "blank arguments of a tool without parameters", tool: "fail", args: "",
			wantServerCalls: 1, wantResult: "Error: the backend is down"},
		{name: "white space", tool: "fail", args: " \n",
			wantServerCalls: 1, wantResult: "Error: the backend is down"},
		{name: "invalid JSON", tool: "get_weather", args: `{"city": "Lima"`,
			wantResult: `Error: the arguments are not valid JSON (unexpected end of JSON input): "{\"city\": \"Lima\""`},
		{name: "two objects run together", tool: "get_weather", args: `{"city":"Lima"}{"city":"Quito"}`,
			wantResult: `Error: the arguments are not valid JSON (invalid character '{' after top-level value): "{\"city\":\"Lima\"}{\"city\":\"Quito\"}"`},
		{name: "an array", tool: "get_weather", args: `["Lima"]`,
			wantResult: `Error: the arguments must be a JSON object, got an array: "[\"Lima\"]"`},
		{name: "a number", tool: "get_weather", args: `42`,
			wantResult: `Error: the arguments must be a JSON object, got a number: "42"`},
		{name: "an unknown tool with invalid arguments", tool: "get_wether", args: `{"city":`,
			wantResult: `Error: unknown tool "get_wether"`},
		{name: "cut off at the token limit", tool: "get_weather", args: `{"city":"Li`, finish: "length",
			wantResult: `Error: the arguments are not valid JSON (unexpected end of JSON input): "{\"city\":\"Li"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			finish := tc.finish
			if finish == "" {
				finish = "tool_calls"
			}
			args, err := json.Marshal(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			s := llmtest.NewServer(t, rawReply(rawCalls(rawCall("c1", tc.tool, string(args))), finish))
			s.Handle(strictHistory("Lima is sunny."))
			var ev events
			l := newLoop(t, s, agentloop.Config{})
			res, err := l.Run(t.Context(), agentloop.Input{Task: "Weather in Lima?", Mode: agentloop.ModeFull, Tools: tools, Sink: &ev})
			if err != nil {
				t.Fatal(err)
			}
			if res.Answer != "Lima is sunny." {
				t.Errorf("answer %q", res.Answer)
			}
			if n := int(ts.calls.Load()); n != tc.wantServerCalls {
				t.Errorf("%d calls reached the server, want %d", n, tc.wantServerCalls)
			}
			reqs := s.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			var sent []llm.ToolCall
			for _, m := range reqs[1].Messages {
				sent = append(sent, m.ToolCalls...)
			}
			if len(sent) != 1 || sent[0].Function.Arguments != "{}" || sent[0].Function.Name != tc.tool || sent[0].ID != "c1" {
				t.Errorf("sent back %s, want %s({}) as c1", mustJSON(t, sent), tc.tool)
			}
			results := toolMessages(reqs[1].Messages)
			if len(results) != 1 || !strings.HasPrefix(results[0].Content, tc.wantResult) {
				t.Errorf("results %s, want one starting %q", mustJSON(t, results), tc.wantResult)
			}
			// The transcript is what was sent; the event keeps the model's text.
			var kept []llm.ToolCall
			for _, m := range res.Messages {
				kept = append(kept, m.ToolCalls...)
			}
			if len(kept) != 1 || kept[0].Function.Arguments != "{}" {
				t.Errorf("transcript calls %s", mustJSON(t, kept))
			}
			if calls := ev.of(agentloop.EventToolCall); len(calls) != 1 || calls[0].Data["arguments"] != tc.args {
				t.Errorf("tool.call events %s, want arguments %q", mustJSON(t, calls), tc.args)
			}
		})
	}
}

// strictNames answers as OpenAI's API does: a request whose history holds
// a call without a name is refused with 400; any other gets answer.
func strictNames(answer string) func(llmtest.RecordedRequest) llmtest.Reply {
	return func(r llmtest.RecordedRequest) llmtest.Reply {
		for i, m := range r.Messages {
			for k, c := range m.ToolCalls {
				if strings.TrimSpace(c.Function.Name) == "" {
					return llmtest.Reply{Status: 400, Content: fmt.Sprintf("Invalid 'messages[%d].tool_calls[%d].function.name': empty string. "+
						"Expected a string with minimum length 1, but got an empty string instead.", i, k)}
				}
			}
		}
		return textReply(answer)
	}
}

// A call without a name (StepFun's and Xiaomi MiMo's APIs send some, and
// proxies that lose one while merging a stream) goes into history under a
// placeholder name, and its result says it named no tool; the call beside
// it runs. Before: the name went back empty, and OpenAI's API (Azure's,
// and Anthropic's behind proxies, likewise) refused the next request
// ("Invalid 'messages[1].tool_calls[0].function.name': empty string"),
// failing the job one round after the call; the result said
// 'unknown tool ""'.
func TestNamelessCallsGoBackNamed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, call string }{
		{"empty name", `{"id":"c1","type":"function","function":{"name":"","arguments":"{}"}}`},
		{"blank name", `{"id":"c1","type":"function","function":{"name":" \n","arguments":"{}"}}`},
		{"no name", `{"id":"c1","type":"function","function":{"arguments":"{\"city\":\"Lima\"}"}}`},
		{"no function", `{"id":"c1","type":"function","function":null}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, rawReply(rawCalls(tc.call, rawCall("c2", "get_weather", limaArgs)), "tool_calls"))
			s.Handle(strictNames("Lima is sunny."))
			var ev events
			res, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "Weather in Lima?", Mode: agentloop.ModeFull, Tools: tools, Sink: &ev})
			if err != nil {
				t.Fatal(err)
			}
			if res.Answer != "Lima is sunny." || ts.calls.Load() != 1 {
				t.Errorf("answer %q, %d server calls; want the answer and get_weather run", res.Answer, ts.calls.Load())
			}
			results := toolMessages(res.Messages)
			if len(results) != 2 || results[0].ToolCallID != "c1" || !strings.HasPrefix(results[0].Content, "Error: the call names no tool") ||
				!strings.Contains(results[0].Content, "get_weather") || results[1].Content != "weather in Lima: 21c, sunny" {
				t.Errorf("results %s", mustJSON(t, results))
			}
			var kept []llm.ToolCall
			for _, m := range res.Messages {
				kept = append(kept, m.ToolCalls...)
			}
			if len(kept) != 2 || kept[0].Function.Name != agentloop.UnnamedCall || kept[1].Function.Name != "get_weather" {
				t.Errorf("transcript calls %s", mustJSON(t, kept))
			}
			// The event keeps what the model sent.
			if calls := ev.of(agentloop.EventToolCall); len(calls) != 2 || strings.TrimSpace(calls[0].Data["name"].(string)) != "" {
				t.Errorf("tool.call events %s", mustJSON(t, calls))
			}
		})
	}
}
