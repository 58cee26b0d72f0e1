package agentloop_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// rawReply is a chat completion sent verbatim: message is the choice's
// message (JSON), finish its finish_reason.
func rawReply(message, finish string) llmtest.Reply {
	return llmtest.Reply{Body: `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":` +
		message + `,"finish_reason":"` + finish + `"}],"usage":{"prompt_tokens":10,"completion_tokens":7,"total_tokens":17}}`}
}

// rawCalls is an assistant message with tool calls, each given as its JSON.
func rawCalls(calls ...string) string {
	return `{"role":"assistant","content":null,"tool_calls":[` + strings.Join(calls, ",") + `]}`
}

// rawCall is one tool call's JSON; args is the arguments value's JSON (a
// string, normally).
func rawCall(id, name, args string) string {
	return `{"id":"` + id + `","type":"function","function":{"name":"` + name + `","arguments":` + args + `}}`
}

const limaArgs = `"{\"city\":\"Lima\"}"`

// Replies of model servers other than OpenAI's (vLLM, Ollama, llama.cpp,
// LM Studio, LiteLLM, OpenRouter, Cohere, gpt-oss and DeepSeek-style
// models), through the real client. Each ends as it should: the job gets
// its answer when the reply is usable, or fails with the reason and the
// model. Before the fix: "null", fenced or twice-encoded arguments were
// refused (the model, which had not written them so, could not fix them);
// "functions.get_weather", "get_weather<|channel|>commentary",
// "test__get_weather", "Get_Weather" were unknown tools; a call sent twice
// under one id ran twice; a reply cut off at the token limit became the
// answer (or, with no text, was nudged as empty); SAFETY, MAX_TOKENS and
// error finish reasons passed as answers; <think> blocks and Harmony's
// analysis channel were part of the answer, and a reply of reasoning alone
// was the answer.
func TestOtherServersReplies(t *testing.T) {
	t.Parallel()
	final := textReply("Lima is sunny.")
	for _, tc := range []struct {
		name    string
		mode    agentloop.Mode // default full
		replies []llmtest.Reply
		// The job's outcome: wantAnswer, or an error that is wantErr and
		// holds each of wantMsg.
		wantAnswer string
		wantErr    error
		wantMsg    []string
		// wantRequests to the model, wantServerCalls reaching the MCP server.
		wantRequests, wantServerCalls int
		// wantCall is the first call as history shows it (name(arguments)),
		// wantResult its tool result.
		wantCall, wantResult string
		maxRounds            int
	}{
		{name: "null arguments for a tool without parameters",
			replies:    []llmtest.Reply{rawReply(rawCalls(rawCall("c1", "fail", `"null"`)), "tool_calls"), final},
			wantAnswer: "Lima is sunny.", wantRequests: 2, wantServerCalls: 1,
			wantCall: "fail({})", wantResult: "Error: the backend is down"},
		{name: "arguments in a json fence",
			replies:    []llmtest.Reply{rawReply(rawCalls(rawCall("c1", "get_weather", `"`+"```json\\n{\\\"city\\\":\\\"Lima\\\"}\\n```"+`"`)), "tool_calls"), final},
			wantAnswer: "Lima is sunny.", wantRequests: 2, wantServerCalls: 1,
			wantCall: `get_weather({"city":"Lima"})`, wantResult: "weather in Lima: 21c, sunny"},
		{name: "arguments encoded twice",
			replies:    []llmtest.Reply{rawReply(rawCalls(rawCall("c1", "get_weather", `"\"{\\\"city\\\":\\\"Lima\\\"}\""`)), "tool_calls"), final},
			wantAnswer: "Lima is sunny.", wantRequests: 2, wantServerCalls: 1,
			wantCall: `get_weather({"city":"Lima"})`, wantResult: "weather in Lima: 21c, sunny"},
		{name: "arguments as an object",
			replies:    []llmtest.Reply{rawReply(rawCalls(rawCall("c1", "get_weather", `{"city":"Lima"}`)), "tool_calls"), final},
			wantAnswer: "Lima is sunny.", wantRequests: 2, wantServerCalls: 1,
			wantCall: `get_weather({"city":"Lima"})`, wantResult: "weather in Lima: 21c, sunny"},
		{name: "functions. namespace",
			replies:    []llmtest.Reply{rawReply(rawCalls(rawCall("c1", "functions.get_weather", limaArgs)), "tool_calls"), final},
			wantAnswer: "Lima is sunny.", wantRequests: 2, wantServerCalls: 1,
			wantCall: `get_weather({"city":"Lima"})`, wantResult: "weather in Lima: 21c, sunny"},
		{name: "Harmony channel after the name",
			replies:    []llmtest.Reply{rawReply(rawCalls(rawCall("c1", "get_weather<|channel|>commentary", limaArgs)), "tool_calls"), final},
			wantAnswer: "Lima is sunny.", wantRequests: 2, wantServerCalls: 1,
			wantCall: `get_weather({"city":"Lima"})`, wantResult: "weather in Lima: 21c, sunny"},
		{name: "the server's name before the tool's",
			replies:    []llmtest.Reply{rawReply(rawCalls(rawCall("c1", "test__get_weather", limaArgs)), "tool_calls"), final},
			wantAnswer: "Lima is sunny.", wantRequests: 2, wantServerCalls: 1,
			wantCall: `get_weather({"city":"Lima"})`, wantResult: "weather in Lima: 21c, sunny"},
		{name: "another letter case",
			replies:    []llmtest.Reply{rawReply(rawCalls(rawCall("c1", "Get_Weather", limaArgs)), "tool_calls"), final},
			wantAnswer: "Lima is sunny.", wantRequests: 2, wantServerCalls: 1,
			wantCall: `get_weather({"city":"Lima"})`, wantResult: "weather in Lima: 21c, sunny"},
		{name: "call_tool naming a tool in another case", mode: agentloop.ModeSearch,
			replies: []llmtest.Reply{rawReply(rawCalls(rawCall("c1", "functions.call_tool",
				`"{\"name\":\"Get_Weather\",\"arguments\":{\"city\":\"Lima\"}}"`)), "tool_calls"), final},
			wantAnswer: "Lima is sunny.", wantRequests: 2, wantServerCalls: 1,
			wantCall: `call_tool({"name":"Get_Weather","arguments":{"city":"Lima"}})`, wantResult: "weather in Lima: 21c, sunny"},
		// Seen end to end with bin/worker: "get_sum" for everything's
		// "get-sum", Claude Code's mcp__SERVER__TOOL, and get_tool_details
		// in another case, were unknown tools.
		{name: "a dash for an underscore",
			replies:    []llmtest.Reply{rawReply(rawCalls(rawCall("c1", "get-weather", limaArgs)), "tool_calls"), final},
			wantAnswer: "Lima is sunny.", wantRequests: 2, wantServerCalls: 1,
			wantCall: `get_weather({"city":"Lima"})`, wantResult: "weather in Lima: 21c, sunny"},
		{name: "Claude Code's mcp__ prefix",
			replies:    []llmtest.Reply{rawReply(rawCalls(rawCall("c1", "mcp__test__get_weather", limaArgs)), "tool_calls"), final},
			wantAnswer: "Lima is sunny.", wantRequests: 2, wantServerCalls: 1,
			wantCall: `get_weather({"city":"Lima"})`, wantResult: "weather in Lima: 21c, sunny"},
		{name: "get_tool_details naming a tool in another spelling", mode: agentloop.ModeSearch,
			replies:    []llmtest.Reply{rawReply(rawCalls(rawCall("c1", "get_tool_details", `"{\"name\":\"Get-Weather\"}"`)), "tool_calls"), final},
			wantAnswer: "Lima is sunny.", wantRequests: 2, wantServerCalls: 0,
			wantCall: `get_tool_details({"name":"Get-Weather"})`, wantResult: `{"name":"get_weather"`},
		{name: "another server's prefix stays unknown",
			replies:    []llmtest.Reply{rawReply(rawCalls(rawCall("c1", "github__get_weather", limaArgs)), "tool_calls"), final},
			wantAnswer: "Lima is sunny.", wantRequests: 2, wantServerCalls: 0,
			wantCall: `github__get_weather({"city":"Lima"})`, wantResult: `Error: unknown tool "github__get_weather"; closest names: get_weather`},
		{name: "one call sent twice under one id",
			replies: []llmtest.Reply{rawReply(rawCalls(rawCall("c1", "echo", `"{\"text\":\"hi\"}"`), rawCall("c1", "echo", `"{ \"text\": \"hi\" }"`)), "tool_calls"),
				final},
			wantAnswer: "Lima is sunny.", wantRequests: 2, wantServerCalls: 1,
			wantCall: `echo({"text":"hi"})`, wantResult: "hi"},
		{name: "answer cut off at the token limit",
			replies: []llmtest.Reply{rawReply(`{"role":"assistant","content":"The weather in Lima is sunny with a high of"}`, "length"), final},
			wantErr: agentloop.ErrTruncated, wantRequests: 1,
			wantMsg: []string{`model "test-model"`, `finish_reason "length" with 7 completion tokens`, `ending "The weather in Lima is sunny with a high of"`}},
		{name: "cut off while reasoning",
			replies: []llmtest.Reply{rawReply(`{"role":"assistant","content":null,"reasoning_content":"The user wants the weather. I should"}`, "length"), final},
			wantErr: agentloop.ErrTruncated, wantRequests: 1,
			wantMsg: []string{`model "test-model"`, "before any text"}},
		{name: "MAX_TOKENS through a proxy",
			replies: []llmtest.Reply{rawReply(`{"role":"assistant","content":"Lima is"}`, "MAX_TOKENS"), final},
			wantErr: agentloop.ErrTruncated, wantRequests: 1, wantMsg: []string{`finish_reason "MAX_TOKENS"`}},
		{name: "SAFETY through a proxy",
			replies: []llmtest.Reply{rawReply(`{"role":"assistant","content":null}`, "SAFETY"), final},
			wantErr: agentloop.ErrRefused, wantRequests: 1, wantMsg: []string{`model "test-model"`, `finish_reason "SAFETY", no text`}},
		{name: "finish_reason error",
			replies: []llmtest.Reply{rawReply(`{"role":"assistant","content":"Lima"}`, "error"), final},
			wantErr: agentloop.ErrReplyAbandoned, wantRequests: 1, wantMsg: []string{`model "test-model"`, `finish_reason "error"`}},
		// DeepSeek's API: the reply was cut short for want of resources,
		// which another attempt may not meet. Before: the partial text
		// was the job's answer.
		{name: "finish_reason insufficient_system_resource",
			replies: []llmtest.Reply{rawReply(`{"role":"assistant","content":"Lima is"}`, "insufficient_system_resource"), final},
			wantErr: agentloop.ErrReplyAbandoned, wantRequests: 1, wantMsg: []string{`finish_reason "insufficient_system_resource"`}},
		// Claude's stop_reason refusal and Bedrock's guardrail, passed on
		// by proxies. Before: the text was the answer.
		{name: "finish_reason refusal through a proxy",
			replies: []llmtest.Reply{rawReply(`{"role":"assistant","content":"I can't help with that."}`, "refusal"), final},
			wantErr: agentloop.ErrRefused, wantRequests: 1, wantMsg: []string{`finish_reason "refusal"`}},
		{name: "finish_reason guardrail_intervened",
			replies: []llmtest.Reply{rawReply(`{"role":"assistant","content":"Sorry, the model cannot answer this question."}`, "guardrail_intervened"), final},
			wantErr: agentloop.ErrRefused, wantRequests: 1, wantMsg: []string{`finish_reason "guardrail_intervened"`}},
		// Gemini's MALFORMED_FUNCTION_CALL (behind proxies): the model
		// meant a call the server could not read. It is asked again as
		// for a call written into the text. Before: the text with it was
		// the job's answer; with none, the nudge said the reply was empty,
		// and a second one failed the job as an empty response.
		{name: "MALFORMED_FUNCTION_CALL, then the call",
			replies: []llmtest.Reply{rawReply(`{"role":"assistant","content":"Let me look that up."}`, "MALFORMED_FUNCTION_CALL"),
				rawReply(rawCalls(rawCall("c1", "get_weather", limaArgs)), "tool_calls"), final},
			wantAnswer: "Lima is sunny.", wantRequests: 3, wantServerCalls: 1,
			wantCall: `get_weather({"city":"Lima"})`, wantResult: "weather in Lima: 21c, sunny"},
		{name: "MALFORMED_FUNCTION_CALL twice",
			replies: []llmtest.Reply{rawReply(`{"role":"assistant","content":null}`, "MALFORMED_FUNCTION_CALL"),
				rawReply(`{"role":"assistant","content":""}`, "MALFORMED_FUNCTION_CALL")},
			wantErr: agentloop.ErrMalformedCall, wantRequests: 2,
			wantMsg: []string{`model "test-model"`, `the server could not read the tool call it made (finish_reason "MALFORMED_FUNCTION_CALL")`}},
		{name: "MALFORMED_FUNCTION_CALL when asked for the final answer", maxRounds: 1,
			replies: []llmtest.Reply{rawReply(rawCalls(rawCall("c1", "get_weather", limaArgs)), "tool_calls"),
				rawReply(`{"role":"assistant","content":"Let me check once more."}`, "MALFORMED_FUNCTION_CALL"), final},
			wantAnswer: "Lima is sunny.", wantRequests: 3, wantServerCalls: 1,
			wantCall: `get_weather({"city":"Lima"})`, wantResult: "weather in Lima: 21c, sunny"},
		{name: "think block before the answer",
			replies:    []llmtest.Reply{rawReply(`{"role":"assistant","content":"<think>\nThe user asks about Lima. It is sunny.\n</think>\n\nLima is sunny."}`, "stop")},
			wantAnswer: "Lima is sunny.", wantRequests: 1},
		{name: "Harmony analysis channel before the final one",
			replies:    []llmtest.Reply{rawReply(`{"role":"assistant","content":"<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>final<|message|>Lima is sunny.<|return|>"}`, "stop")},
			wantAnswer: "Lima is sunny.", wantRequests: 1},
		{name: "reasoning alone, then an answer",
			replies:    []llmtest.Reply{rawReply(`{"role":"assistant","content":"<think>I should look up Lima.</think>"}`, "stop"), final},
			wantAnswer: "Lima is sunny.", wantRequests: 2},
		{name: "reasoning alone, twice",
			replies: []llmtest.Reply{rawReply(`{"role":"assistant","content":"<think>I should look up Lima.</think>"}`, "stop"),
				rawReply(`{"role":"assistant","content":"<think>Still thinking"}`, "stop")},
			wantErr: agentloop.ErrEmptyResponse, wantRequests: 2,
			wantMsg: []string{`model "test-model"`, `only reasoning, no answer (finish_reason "stop")`}},
		{name: "cut off when asked for the final answer",
			replies: []llmtest.Reply{rawReply(rawCalls(rawCall("c1", "get_weather", limaArgs)), "tool_calls"),
				rawReply(`{"role":"assistant","content":"Lima is","tool_calls":[`+rawCall("c2", "get_weather", limaArgs)+`]}`, "length")},
			maxRounds: 1, wantErr: agentloop.ErrTruncated, wantRequests: 2, wantServerCalls: 1, wantMsg: []string{`ending "Lima is"`}},
		// GitHub Copilot's API: one reply split into choices, the text in
		// one (finish_reason "stop" here) and the calls in the next.
		// Before: the call was lost and "Let me check." was the answer.
		{name: "text and calls in two choices",
			replies: []llmtest.Reply{{Body: `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[` +
				`{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Let me check."}},` +
				`{"index":0,"finish_reason":"tool_calls","message":` + rawCalls(rawCall("toolu_01", "get_weather", limaArgs)) + `}]}`}, final},
			wantAnswer: "Lima is sunny.", wantRequests: 2, wantServerCalls: 1,
			wantCall: `get_weather({"city":"Lima"})`, wantResult: "weather in Lima: 21c, sunny"},
		{name: "tool call complete in a reply cut off",
			replies:    []llmtest.Reply{rawReply(rawCalls(rawCall("c1", "get_weather", limaArgs)), "length"), final},
			wantAnswer: "Lima is sunny.", wantRequests: 2, wantServerCalls: 1,
			wantCall: `get_weather({"city":"Lima"})`, wantResult: "weather in Lima: 21c, sunny"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, tc.replies...)
			l := newLoop(t, s, agentloop.Config{})
			mode := tc.mode
			if mode == "" {
				mode = agentloop.ModeFull
			}
			res, err := l.Run(t.Context(), agentloop.Input{Task: "Weather in Lima?", Mode: mode, Tools: tools, MaxRounds: tc.maxRounds})
			if n := len(s.Requests()); n != tc.wantRequests {
				t.Errorf("%d requests, want %d", n, tc.wantRequests)
			}
			if n := int(ts.calls.Load()); n != tc.wantServerCalls {
				t.Errorf("%d calls reached the server, want %d", n, tc.wantServerCalls)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || res.StopReason != agentloop.StopError {
					t.Fatalf("err = %v (stop %s), want %v", err, res.StopReason, tc.wantErr)
				}
				for _, want := range tc.wantMsg {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q lacks %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Answer != tc.wantAnswer || res.Messages[len(res.Messages)-1].Content != tc.wantAnswer {
				t.Errorf("answer %q, last message %q; want %q", res.Answer, res.Messages[len(res.Messages)-1].Content, tc.wantAnswer)
			}
			var calls []llm.ToolCall
			for _, m := range res.Messages {
				calls = append(calls, m.ToolCalls...)
			}
			results := toolMessages(res.Messages)
			if tc.wantCall == "" {
				if len(calls) != 0 {
					t.Errorf("calls %s", mustJSON(t, calls))
				}
				return
			}
			if len(calls) != 1 || len(results) != 1 {
				t.Fatalf("calls %s, results %s", mustJSON(t, calls), mustJSON(t, results))
			}
			if got := calls[0].Function.Name + "(" + calls[0].Function.Arguments + ")"; got != tc.wantCall {
				t.Errorf("call %s, want %s", got, tc.wantCall)
			}
			if !strings.HasPrefix(results[0].Content, tc.wantResult) || results[0].ToolCallID != calls[0].ID {
				t.Errorf("result %s, want %q for %s", mustJSON(t, results[0]), tc.wantResult, calls[0].ID)
			}
			// What the server is sent back is what ran.
			reqs := s.Requests()
			var got []llm.ToolCall
			for _, m := range reqs[len(reqs)-1].Messages {
				got = append(got, m.ToolCalls...)
			}
			if len(got) != 1 || got[0].Function != calls[0].Function {
				t.Errorf("sent back %s", mustJSON(t, got))
			}
		})
	}
}

// A hostile server's tool name of megabytes is compared with the catalog's
// names by its first 128 bytes only. Before: the edit distance to every
// tool cost the product of the lengths (a 4 MiB name against 300 tools ran
// for minutes), and the error quoted all of it.
func TestHugeUnknownToolName(t *testing.T) {
	t.Parallel()
	srv := server.NewMCPServer("many", "1.0.0", server.WithToolCapabilities(false))
	for i := range 300 {
		srv.AddTool(mcp.NewTool(fmt.Sprintf("tool_number_%03d", i), mcp.WithDescription("A tool.")),
			func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("ran"), nil
			})
	}
	tools := inProcessView(t, nil, map[string]*server.MCPServer{"many": srv})
	name := strings.Repeat("tool_number_", 4<<20/12)
	s := llmtest.NewServer(t, rawReply(rawCalls(rawCall("c1", name, `"{}"`)), "tool_calls"), textReply("done"))
	l := newLoop(t, s, agentloop.Config{})
	res, err := l.Run(t.Context(), agentloop.Input{Task: "go", Mode: agentloop.ModeFull, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	results := toolMessages(res.Messages)
	want := fmt.Sprintf(`Error: unknown tool %q; closest names: `, name[:128])
	note := fmt.Sprintf("(the name quoted is the first 128 of its %d bytes)", len(name))
	if len(results) != 1 || !strings.HasPrefix(results[0].Content, want) || !strings.HasSuffix(results[0].Content, note) {
		t.Errorf("results %.400s", mustJSON(t, results))
	}
}
