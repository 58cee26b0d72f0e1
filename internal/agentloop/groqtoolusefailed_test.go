package agentloop_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// groqToolUseFailed is Groq's refusal of a reply whose tool call its
// parser could not read, quoting what the model wrote.
func groqToolUseFailed(t *testing.T, generation string) llmtest.Reply {
	t.Helper()
	fg, err := json.Marshal(generation)
	if err != nil {
		t.Fatal(err)
	}
	return llmtest.Reply{Status: 400, Body: `{"error":{"message":"Failed to call a function. Please adjust your prompt. See 'failed_generation' for more details.",` +
		`"type":"invalid_request_error","code":"tool_use_failed","failed_generation":` + string(fg) + `}}`}
}

// Groq refuses, with 400 tool_use_failed, a reply whose tool call it
// could not read (intermittently, with Llama and Kimi models), quoting the
// model's output. That output is the reply: a call written in a shape the
// loop reads runs; otherwise the model is asked again once, as for
// Gemini's MALFORMED_FUNCTION_CALL. Before: every such refusal failed the
// job at once ("provider returned 400: Failed to call a function. Please
// adjust your prompt."), not retried.
func TestGroqToolUseFailed(t *testing.T) {
	t.Parallel()
	final := textReply("Lima is sunny.")
	for _, tc := range []struct {
		name            string
		replies         func(t *testing.T) []llmtest.Reply
		wantRequests    int
		wantServerCalls int64
		wantErr         error
		wantMsg         string
	}{
		{name: "a Llama call in the failed generation", replies: func(t *testing.T) []llmtest.Reply {
			return []llmtest.Reply{groqToolUseFailed(t, `<function=get_weather>{"city": "Lima"}</function>`), final}
		}, wantRequests: 2, wantServerCalls: 1},
		{name: "an unreadable generation, then the call", replies: func(t *testing.T) []llmtest.Reply {
			return []llmtest.Reply{groqToolUseFailed(t, `Tool use failed: JSON does not match the expected schema for tool calls`),
				toolReply(call("get_weather", `{"city":"Lima"}`)), final}
		}, wantRequests: 3, wantServerCalls: 1},
		{name: "refused twice", replies: func(t *testing.T) []llmtest.Reply {
			return []llmtest.Reply{groqToolUseFailed(t, ""), groqToolUseFailed(t, "")}
		}, wantRequests: 2, wantErr: agentloop.ErrMalformedCall, wantMsg: "it refused the reply: tool_use_failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, tc.replies(t)...)
			res, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "Weather in Lima?", Mode: agentloop.ModeFull, Tools: tools})
			if n := len(s.Requests()); n != tc.wantRequests {
				t.Errorf("%d requests, want %d", n, tc.wantRequests)
			}
			if got := ts.calls.Load(); got != tc.wantServerCalls {
				t.Errorf("%d calls reached the server, want %d", got, tc.wantServerCalls)
			}
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Errorf("err = %v, want %v with %q", err, tc.wantErr, tc.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Answer != "Lima is sunny." {
				t.Errorf("answer %q", res.Answer)
			}
			// The refused output is no turn of history: the call is.
			for _, m := range res.Messages {
				if strings.Contains(m.Content, "<function=") || strings.Contains(m.Content, "Tool use failed") {
					t.Errorf("history holds the refused output: %s", mustJSON(t, res.Messages))
				}
			}
		})
	}
}
