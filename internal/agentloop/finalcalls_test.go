package agentloop_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// The last request (max_rounds reached, no tools) answered twice with tool
// calls alone fails the job saying so. Before: the error said "no text and
// no tool call" for calls sent as tool_calls (a proxy that adds a tool of
// its own, as LiteLLM does for Anthropic, can send them) and "only
// reasoning, no answer" for a call written into the text.
func TestFinalRequestAnsweredWithCalls(t *testing.T) {
	t.Parallel()
	markup := textReply(`<tool_call>{"name": "echo", "arguments": {"text": "again"}}</tool_call>`)
	for _, tc := range []struct {
		name    string
		finals  []llmtest.Reply
		wantMsg []string
	}{
		{"tool_calls twice", []llmtest.Reply{toolReply(call("echo", `{"text":"b"}`)), toolReply(call("echo", `{"text":"c"}`))},
			[]string{`only tool calls ("echo"), which cannot run: max_rounds (1) was reached`, `finish_reason "tool_calls"`}},
		{"a call in the text twice", []llmtest.Reply{markup, markup},
			[]string{`only tool calls ("echo"), which cannot run`}},
		{"two calls, then an empty reply", []llmtest.Reply{toolReply(call("echo", `{"text":"b"}`), call("get_weather", `{"city":"Lima"}`)), textReply("")},
			[]string{"no text and no tool call"}},
		{"reasoning alone twice", []llmtest.Reply{textReply("<think>hm"), textReply("<think>hm")},
			[]string{"only reasoning, no answer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, append([]llmtest.Reply{toolReply(call("echo", `{"text":"a"}`))}, tc.finals...)...)
			l := newLoop(t, s, agentloop.Config{})
			res, err := l.Run(t.Context(), agentloop.Input{Task: "go", Tools: tools, MaxRounds: 1})
			if !errors.Is(err, agentloop.ErrEmptyResponse) || res.StopReason != agentloop.StopError {
				t.Fatalf("err = %v (stop %s), want ErrEmptyResponse", err, res.StopReason)
			}
			for _, want := range tc.wantMsg {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if n := len(s.Requests()); n != 3 {
				t.Errorf("%d requests, want 3", n)
			}
			if n := ts.calls.Load(); n != 1 {
				t.Errorf("%d calls reached the server, want 1", n)
			}
		})
	}
}
