package llm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// completion is a chat-completion body whose first choice has message
// (JSON) and finish reason.
func completion(message, finish string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":` +
		message + `,"finish_reason":"` + finish + `"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`
}

// Replies with status 200 that other model servers and proxies send: each
// is read as the completion it is, or ends in an error that says what came
// back, retried by openai-go only when the reply says the fault is
// transient. Before: an error object in a 200 body was "response has no
// choices" (its message lost, never retried); HTML, text, an event stream
// or an empty body gave openai-go's decoding error ("expected destination
// type of 'string' or '[]byte' for responses with content-type
// 'text/html'..."); a byte order mark failed the reply; content sent as
// an array of parts became the answer as raw JSON; a legacy function_call
// was dropped (the reply looked empty); a body had no size bound; JSON
// sent as text/plain was refused; a redirect to another origin was a
// connection error (retried, and the job handed back).
func TestUnusualSuccessfulReplies(t *testing.T) {
	t.Parallel()
	ok := llmtest.Reply{Content: "done"}
	html := map[string]string{"Content-Type": "text/html; charset=utf-8"}
	for _, tc := range []struct {
		name    string
		replies []llmtest.Reply
		// wantRequests are the attempts made (MaxRetries 2: at most 3).
		wantRequests int
		// wantContent and wantCall describe a usable reply.
		wantContent, wantCall string
		// wantErr are substrings of the error (none: success).
		wantErr []string
		// retryable: the error is not ErrNonRetryable.
		retryable bool
		// badReply: the error is ErrBadReply; inReply: an *APIError with InReply.
		badReply, inReply bool
	}{
		{name: "error object with a retryable code, then an answer",
			replies:      []llmtest.Reply{{Body: `{"error":{"message":"upstream overloaded","code":503}}`}, ok},
			wantRequests: 2, wantContent: "done"},
		{name: "error object with a retryable code, persisting",
			replies: []llmtest.Reply{{Body: `{"error":{"message":"upstream overloaded","code":502}}`},
				{Body: `{"error":{"message":"upstream overloaded","code":502}}`}, {Body: `{"error":{"message":"upstream overloaded","code":"502"}}`}},
			wantRequests: 3, wantErr: []string{"giving up after 3 attempts", "error in a successful reply, with code 502: upstream overloaded"},
			retryable: true, inReply: true},
		{name: "error object with code 429 and Retry-After",
			replies:      []llmtest.Reply{{Body: `{"error":{"message":"Rate limit reached","code":429}}`, Header: map[string]string{"Retry-After": "0"}}, ok},
			wantRequests: 2, wantContent: "done"},
		{name: "error object with a permanent code",
			replies:      []llmtest.Reply{{Body: `{"error":{"message":"model 'x' not found","type":"invalid_request_error","code":404}}`}, ok},
			wantRequests: 1, wantErr: []string{"with code 404: model 'x' not found"}, inReply: true},
		{name: "error object without a code",
			replies:      []llmtest.Reply{{Body: `{"error":{"message":"No endpoints found that support tool use"}}`}, ok},
			wantRequests: 1, wantErr: []string{"provider returned an error in a successful reply: No endpoints found that support tool use"}, inReply: true},
		{name: "error given as a string",
			replies:      []llmtest.Reply{{Body: `{"error":"model \"llama3\" not found, try pulling it first"}`}, ok},
			wantRequests: 1, wantErr: []string{`model "llama3" not found, try pulling it first`}, inReply: true},
		{name: "vLLM error object",
			replies:      []llmtest.Reply{{Body: `{"object":"error","message":"This model's maximum context length is 8192 tokens","type":"BadRequestError","param":null,"code":400}`}, ok},
			wantRequests: 1, wantErr: []string{"with code 400: This model's maximum context length is 8192 tokens"}, inReply: true},
		{name: "error null beside choices is a completion",
			replies:      []llmtest.Reply{{Body: strings.Replace(completion(`{"role":"assistant","content":"fine"}`, "stop"), `"usage"`, `"error":null,"usage"`, 1)}},
			wantRequests: 1, wantContent: "fine"},
		{name: "HTML page",
			replies:      []llmtest.Reply{{Body: "<!DOCTYPE html><html><head><title>Open WebUI</title></head></html>", Header: html}, ok},
			wantRequests: 1, wantErr: []string{"unusable reply (status 200): not a JSON object (Content-Type text/html; charset=utf-8; a web page: is BaseURL the API's root", `"<!DOCTYPE html><html><head><title>Open WebUI`}, badReply: true},
		{name: "plain text",
			replies:      []llmtest.Reply{{Body: "Ollama is running", Header: map[string]string{"Content-Type": "text/plain"}}, ok},
			wantRequests: 1, wantErr: []string{"not a JSON object (Content-Type text/plain): \"Ollama is running\""}, badReply: true},
		{name: "event stream not asked for",
			replies:      []llmtest.Reply{{Body: "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n", Header: map[string]string{"Content-Type": "text/event-stream"}}, ok},
			wantRequests: 1, wantErr: []string{"an event stream (Content-Type text/event-stream), though no stream was asked for", "data: "}, badReply: true},
		{name: "empty body",
			replies:      []llmtest.Reply{{Body: " \n"}, ok},
			wantRequests: 1, wantErr: []string{"unusable reply (status 200): an empty body"}, badReply: true},
		{name: "JSON null",
			replies:      []llmtest.Reply{{Body: "null"}, ok},
			wantRequests: 1, wantErr: []string{`not a JSON object (Content-Type application/json): "null"`}, badReply: true},
		{name: "truncated JSON",
			replies:      []llmtest.Reply{{Body: `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assist`}, ok},
			wantRequests: 1, wantErr: []string{"not a chat completion (", "unexpected EOF", `"{\"id\":\"chatcmpl-1\"`}, badReply: true},
		{name: "no choices, the body quoted",
			replies:      []llmtest.Reply{{Body: `{"detail":"Not Found"}`}, ok},
			wantRequests: 1, wantErr: []string{`response has no choices: "{\"detail\":\"Not Found\"}"`}},
		{name: "JSON sent as text/plain",
			replies:      []llmtest.Reply{{Body: completion(`{"role":"assistant","content":"fine"}`, "stop"), Header: map[string]string{"Content-Type": "text/plain; charset=utf-8"}}},
			wantRequests: 1, wantContent: "fine"},
		{name: "redirect to another origin",
			replies: []llmtest.Reply{{Status: 307, Header: map[string]string{"Location": "https://login.example.com/v1/chat/completions"}, Body: "moved"}, ok},
			// Before: openai-go's origin guard refused it, reported as a
			// connection error, which the worker retries.
			wantRequests: 1, wantErr: []string{`unusable reply (status 307): a redirect to "https://login.example.com/v1/chat/completions", not followed`}, badReply: true},
		{name: "redirect to a URL carrying a credential",
			// The error is stored and published with the job: a signed
			// Location's token was quoted whole.
			replies:      []llmtest.Reply{{Status: 302, Header: map[string]string{"Location": "https://login.example.com/sso?token=SECRETTOKEN123&next=%2Fv1"}, Body: "moved"}},
			wantRequests: 1, wantErr: []string{`a redirect to "https://login.example.com/sso?token=xxxxx&next=%2Fv1", not followed`}, badReply: true},
		{name: "byte order mark",
			replies:      []llmtest.Reply{{Body: "\ufeff" + completion(`{"role":"assistant","content":"fine"}`, "stop")}},
			wantRequests: 1, wantContent: "fine"},
		{name: "content as text parts",
			replies:      []llmtest.Reply{{Body: completion(`{"role":"assistant","content":[{"type":"text","text":"The answer "},{"type":"text","text":"is 42."}]}`, "stop")}},
			wantRequests: 1, wantContent: "The answer is 42."},
		{name: "content parts with thinking",
			replies: []llmtest.Reply{{Body: completion(`{"role":"assistant","content":[{"type":"thinking","thinking":[{"type":"text","text":"let me see"}]},`+
				`{"type":"text","text":"The answer is 42."}]}`, "stop")}},
			wantRequests: 1, wantContent: "The answer is 42."},
		{name: "legacy function_call",
			replies:      []llmtest.Reply{{Body: completion(`{"role":"assistant","content":null,"function_call":{"name":"get_weather","arguments":"{\"city\":\"Lima\"}"}}`, "function_call")}},
			wantRequests: 1, wantCall: `get_weather({"city":"Lima"})`},
		{name: "arguments as an object",
			replies:      []llmtest.Reply{{Body: completion(`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":{"city":"Lima"}}}]}`, "tool_calls")}},
			wantRequests: 1, wantCall: `get_weather({"city":"Lima"})`},
		// GitHub Copilot's API (Claude and Gemini models) splits one reply
		// into several choices, the text in one and the tool calls in
		// another, all with index 0; no n was asked for. Before: only
		// choices[0] was read, so the calls were lost and the text
		// ("Let me check.") became the job's answer.
		{name: "one reply split across choices",
			replies: []llmtest.Reply{{Body: `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[` +
				`{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"Let me check."}},` +
				`{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Lima\"}"}}]}}]}`}},
			wantRequests: 1, wantContent: "Let me check.", wantCall: `get_weather({"city":"Lima"})`},
		// OpenAI's custom tool calls ({"type":"custom","custom":{"name",
		// "input"}}), which a server may send though only functions are
		// offered. Before: the call kept type "custom" with an empty
		// function (no name), which no server takes back in history.
		{name: "custom tool call",
			replies:      []llmtest.Reply{{Body: completion(`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"custom","custom":{"name":"get_weather","input":"{\"city\":\"Lima\"}"}}]}`, "tool_calls")}},
			wantRequests: 1, wantCall: `get_weather({"city":"Lima"})`},
		// A choice without a message: a stream chunk's "delta" (a proxy
		// that streams from upstream and sends the chunk whole), or a
		// legacy completion's "text". Before: the reply read as empty, so
		// the loop nudged it and then failed it as "no text and no tool
		// call".
		{name: "a stream chunk's delta as the reply",
			replies: []llmtest.Reply{{Body: `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Let me check.",` +
				`"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Lima\"}"}}]},"finish_reason":"tool_calls"}]}`}},
			wantRequests: 1, wantContent: "Let me check.", wantCall: `get_weather({"city":"Lima"})`},
		{name: "a legacy completion's text",
			replies:      []llmtest.Reply{{Body: `{"id":"x","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"The answer is 42.","finish_reason":"stop"}]}`}},
			wantRequests: 1, wantContent: "The answer is 42."},
		// A call whose arguments come under another key, as Llama 3.1's
		// format ("parameters") and Anthropic's ("input") name them, from
		// a server or proxy that passes the model's call on as it was
		// written. Before: the call had no arguments ({}), and the tool
		// was called without them.
		{name: "arguments under parameters",
			replies:      []llmtest.Reply{{Body: completion(`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","parameters":{"city":"Lima"}}}]}`, "tool_calls")}},
			wantRequests: 1, wantCall: `get_weather({"city":"Lima"})`},
		{name: "arguments under input, as text",
			replies:      []llmtest.Reply{{Body: completion(`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","input":"{\"city\":\"Lima\"}"}}]}`, "tool_calls")}},
			wantRequests: 1, wantCall: `get_weather({"city":"Lima"})`},
		// The name and arguments beside the id, without "function" (the
		// Responses API's function_call item, as some proxies translate
		// it). Before: the call had no name.
		{name: "a call without its function object",
			replies:      []llmtest.Reply{{Body: completion(`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","name":"get_weather","arguments":"{\"city\":\"Lima\"}"}]}`, "tool_calls")}},
			wantRequests: 1, wantCall: `get_weather({"city":"Lima"})`},
		// A proxy that sends its one choice twice: the reply is once.
		// Before (with choices merged): the text came twice.
		{name: "one choice sent twice",
			replies: []llmtest.Reply{{Body: `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[` +
				`{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"Let me check.","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Lima\"}"}}]}},` +
				`{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"Let me check.","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Lima\"}"}}]}}]}`}},
			wantRequests: 1, wantContent: "Let me check.", wantCall: `get_weather({"city":"Lima"})`},
		{name: "body over MaxReplyBytes",
			replies:      []llmtest.Reply{{Content: strings.Repeat("x", 5000)}, ok},
			wantRequests: 1, wantErr: []string{"unusable reply (status 200): a body larger than 4096 bytes (MaxReplyBytes)"}, badReply: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, tc.replies...)
			c := newClient(t, s, func(cfg *llm.Config) { cfg.MaxRetries, cfg.MaxReplyBytes = 2, 4096 })
			resp, err := c.Complete(testCtx(t), userRequest())
			if n := len(s.Requests()); n != tc.wantRequests {
				t.Errorf("%d requests, want %d", n, tc.wantRequests)
			}
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				var call string
				if len(resp.Message.ToolCalls) == 1 {
					f := resp.Message.ToolCalls[0].Function
					call = f.Name + "(" + f.Arguments + ")"
				}
				if resp.Message.Content != tc.wantContent || call != tc.wantCall || len(resp.Message.ToolCalls) > 1 {
					t.Errorf("content %q, calls %+v; want %q, %s", resp.Message.Content, resp.Message.ToolCalls, tc.wantContent, tc.wantCall)
				}
				for _, c := range resp.Message.ToolCalls {
					if c.Type != "function" {
						t.Errorf("call type %q, want function (the type every call is sent back as)", c.Type)
					}
				}
				return
			}
			if err == nil {
				t.Fatalf("no error; response %+v", resp)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if got := !errors.Is(err, llm.ErrNonRetryable); got != tc.retryable {
				t.Errorf("retryable = %v, want %v (%v)", got, tc.retryable, err)
			}
			if got := errors.Is(err, llm.ErrBadReply); got != tc.badReply {
				t.Errorf("ErrBadReply = %v, want %v (%v)", got, tc.badReply, err)
			}
			var apiErr *llm.APIError
			if got := errors.As(err, &apiErr) && apiErr.InReply; got != tc.inReply {
				t.Errorf("APIError in reply = %v, want %v (%v)", got, tc.inReply, err)
			}
		})
	}
}

// Usage as servers report it: missing, with fields of their own, as
// strings, negative or absurd. A count is never negative nor beyond 2^40.
// Before: a negative count passed through to the job's usage and its
// llm.response event, whose Prometheus counter panics on a negative add
// (the worker reported "runner panicked: counter cannot decrease in
// value"), and huge counts could overflow a job's sums.
func TestUsageAsReported(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, usage string
		want        llm.Usage
	}{
		{"missing", ``, llm.Usage{}},
		{"null", `,"usage":null`, llm.Usage{}},
		{"extra fields", `,"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,"queue_time":0.1,"prompt_tokens_details":null,"completion_tokens_details":{"reasoning_tokens":7}}`, llm.Usage{PromptTokens: 3, CompletionTokens: 2}},
		{"strings and floats", `,"usage":{"prompt_tokens":"3","completion_tokens":2.0}`, llm.Usage{PromptTokens: 3, CompletionTokens: 2}},
		{"negative", `,"usage":{"prompt_tokens":-1,"completion_tokens":-5,"prompt_tokens_details":{"cached_tokens":-2}}`, llm.Usage{}},
		{"absurd", `,"usage":{"prompt_tokens":9223372036854775807,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":9223372036854775807}}`, llm.Usage{PromptTokens: 1 << 40, CompletionTokens: 4, CachedPromptTokens: 1 << 40}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, llmtest.Reply{Body: `{"id":"x","object":"chat.completion","created":1,"model":"m",` +
				`"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]` + tc.usage + `}`})
			resp, err := newClient(t, s, nil).Complete(testCtx(t), userRequest())
			if err != nil {
				t.Fatal(err)
			}
			if resp.Usage != tc.want || resp.Message.Content != "ok" {
				t.Errorf("usage %+v, content %q; want %+v", resp.Usage, resp.Message.Content, tc.want)
			}
		})
	}
}
