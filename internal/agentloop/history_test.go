package agentloop_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// A continuation's history (a stored transcript) starts with the earlier
// job's system prompt; the model must get one system prompt, not two.
func TestHistorySystemPrompt(t *testing.T) {
	t.Parallel()
	earlier := []llm.Message{
		{Role: llm.RoleSystem, Content: "old prompt"},
		{Role: llm.RoleUser, Content: "before"},
		{Role: llm.RoleAssistant, Content: "earlier answer"},
	}
	tests := []struct {
		name    string
		system  string
		history []llm.Message
		want    string // the roles and system contents the model receives
	}{
		{"job prompt supersedes the history's", "new prompt", earlier, "system:new prompt user assistant user"},
		{"history's prompt kept without a job prompt", "", earlier, "system:old prompt user assistant user"},
		{"history without a prompt", "new prompt", earlier[1:], "system:new prompt user assistant user"},
		{"no prompt at all", "", earlier[1:], "user assistant user"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, textReply("done"))
			l := newLoop(t, s, agentloop.Config{})
			if _, err := l.Run(context.Background(), agentloop.Input{Task: "now", System: tt.system, History: tt.history}); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range s.Requests()[0].Messages {
				if m.Role == llm.RoleSystem {
					got = append(got, "system:"+m.Content)
				} else {
					got = append(got, m.Role)
				}
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("model received %q, want %q", strings.Join(got, " "), tt.want)
			}
		})
	}
}

// openAIHistory answers as OpenAI's API does to a history that is no chat
// history: a tool message that follows no call of its id, or a turn of
// calls not followed by a result for each, is refused with 400.
func openAIHistory(answer string) func(llmtest.RecordedRequest) llmtest.Reply {
	return func(r llmtest.RecordedRequest) llmtest.Reply {
		var open []string
		for i, m := range r.Messages {
			if m.Role == llm.RoleTool {
				k := slices.Index(open, m.ToolCallID)
				if k < 0 {
					return llmtest.Reply{Status: 400, Content: fmt.Sprintf("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. (messages[%d])", i)}
				}
				open = slices.Delete(open, k, k+1)
				continue
			}
			if len(open) > 0 {
				return llmtest.Reply{Status: 400, Content: "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: " + strings.Join(open, ", ")}
			}
			for _, c := range m.ToolCalls {
				open = append(open, c.ID)
			}
		}
		return textReply(answer)
	}
}

// A history (hand-written, or cut from a transcript) that is no chat
// history is refused before the model is asked, saying which message is
// wrong. Before: it was sent, and the provider's 400 failed the job
// ("messages with role 'tool' must be a response to a preceeding message
// with 'tool_calls'"), naming a message by its place in the request (the
// system prompt counted), not in the job's history.
func TestMalformedHistoryRefused(t *testing.T) {
	t.Parallel()
	user := llm.Message{Role: llm.RoleUser, Content: "weather?"}
	calls := func(ids ...string) llm.Message {
		m := llm.Message{Role: llm.RoleAssistant}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: id, Type: "function", Function: llm.FunctionCall{Name: "get_weather", Arguments: `{"city":"Lima"}`}})
		}
		return m
	}
	result := func(id string) llm.Message { return llm.Message{Role: llm.RoleTool, ToolCallID: id, Content: "sunny"} }
	answer := llm.Message{Role: llm.RoleAssistant, Content: "Sunny."}
	for _, tc := range []struct {
		name    string
		history []llm.Message
		want    string // "" for a history that is fine
	}{
		{"a transcript", []llm.Message{user, calls("a", "b"), result("b"), result("a"), answer}, ""},
		{"a result of no call", []llm.Message{user, result("a"), answer},
			`history[1]: a tool result for call "a", which no assistant message just before it made`},
		{"a call never answered", []llm.Message{user, calls("a", "b"), result("a")},
			`history[1]: call "b" (get_weather) has no tool result after it`},
		{"a call answered after a user message", []llm.Message{user, calls("a"), user, result("a"), answer},
			`history[1]: call "a" (get_weather) has no tool result after it`},
		{"a result given twice", []llm.Message{user, calls("a"), result("a"), result("a"), answer},
			`history[3]: a tool result for call "a", which no assistant message just before it made (or it was answered already)`},
		{"a developer message", []llm.Message{{Role: "developer", Content: "Be terse."}, user, answer}, ""},
		{"an unknown role", []llm.Message{user, {Role: "model", Content: "Sunny."}},
			`history[1]: role "model" is not system, developer, user, assistant or tool`},
		{"one id in two turns", []llm.Message{user, calls("a"), result("a"), calls("a"), result("a"), answer}, ""},
		{"a call without an id", []llm.Message{user, calls(""), answer},
			`history[1]: call 0 (get_weather) has no id`},
		{"a result without an id", []llm.Message{user, calls("a"), result(""), answer},
			`history[2]: a tool result without a tool_call_id`},
		{"a call without a name", []llm.Message{user, {Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "a", Type: "function", Function: llm.FunctionCall{Arguments: "{}"}}}}, result("a"), answer},
			`history[1]: call "a" names no tool`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t)
			s.Handle(openAIHistory("done"))
			_, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "and now?", System: "Be brief.", History: tc.history})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, agentloop.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want ErrConfig with %q", err, tc.want)
			}
			if n := len(s.Requests()); n != 0 {
				t.Errorf("%d requests sent", n)
			}
			if err2 := llm.CheckHistory(tc.history); err2 == nil || !strings.Contains(err2.Error(), tc.want) {
				t.Errorf("CheckHistory = %v, want %q", err2, tc.want)
			}
		})
	}
}

// openAIIDs answers as OpenAI's API does: a request holding a tool call id
// longer than 40 characters is refused with 400; any other gets answer.
func openAIIDs(answer string) func(llmtest.RecordedRequest) llmtest.Reply {
	return func(r llmtest.RecordedRequest) llmtest.Reply {
		for i, m := range r.Messages {
			for k, c := range m.ToolCalls {
				if n := len(c.ID); n > 40 {
					return llmtest.Reply{Status: 400, Content: fmt.Sprintf("Invalid 'messages[%d].tool_calls[%d].id': string too long. "+
						"Expected a string with maximum length 40, but got a string with length %d instead.", i, k, n)}
				}
			}
		}
		return textReply(answer)
	}
}

// A continuation's history may come from another provider, whose call ids
// this one refuses: ids over 40 characters (GitHub Copilot's 46, proxies'
// generated ones; OpenAI's limit is 40) or with characters outside
// letters, digits, '_' and '-' (Anthropic's pattern) are given ids the
// loop makes up, in the calls and their results alike; others are kept.
// Before: they were sent as they were, and OpenAI's API refused the
// first request ("Invalid 'messages[2].tool_calls[0].id': string too
// long. Expected a string with maximum length 40, but got a string with
// length 46 instead.").
func TestHistoryCallIDsPortable(t *testing.T) {
	t.Parallel()
	long := "call_" + strings.Repeat("0123456789", 4) + "abcdef" // 51
	odd := "呼び出し:1"
	user := llm.Message{Role: llm.RoleUser, Content: "weather?"}
	history := []llm.Message{user,
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
			{ID: long, Type: "function", Function: llm.FunctionCall{Name: "get_weather", Arguments: `{"city":"Lima"}`}},
			{ID: "call_ok", Type: "function", Function: llm.FunctionCall{Name: "get_weather", Arguments: `{"city":"Quito"}`}},
			{ID: odd, Type: "function", Function: llm.FunctionCall{Name: "get_weather", Arguments: `{"city":"Bogotá"}`}},
		}},
		{Role: llm.RoleTool, ToolCallID: odd, Content: "Bogotá: rain"},
		{Role: llm.RoleTool, ToolCallID: long, Content: "Lima: sun"},
		{Role: llm.RoleTool, ToolCallID: "call_ok", Content: "Quito: fog"},
		{Role: llm.RoleAssistant, Content: "Mixed."},
		// The same long id again in a later turn: a call of its own.
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: long, Type: "function", Function: llm.FunctionCall{Name: "echo", Arguments: `{"text":"x"}`}}}},
		{Role: llm.RoleTool, ToolCallID: long, Content: "x"},
		{Role: llm.RoleAssistant, Content: "Done."},
	}
	orig := mustJSON(t, history)
	s := llmtest.NewServer(t)
	s.Handle(openAIIDs("continued"))
	res, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "and now?", History: history})
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "continued" || mustJSON(t, history) != orig {
		t.Fatalf("answer %q; history changed in place: %v", res.Answer, mustJSON(t, history) != orig)
	}
	sent := s.Requests()[0].Messages
	if bad := checkChatHistory(sent, false); len(bad) > 0 {
		t.Fatalf("sent %s: %v", mustJSON(t, sent), bad)
	}
	calls, again := sent[1].ToolCalls, sent[6].ToolCalls
	if calls[1].ID != "call_ok" || calls[0].ID == long || calls[2].ID == odd || again[0].ID == calls[0].ID {
		t.Errorf("ids sent: %s, later %s", mustJSON(t, calls), mustJSON(t, again))
	}
	// The results still answer their calls: Lima's the first call's.
	if sent[3].ToolCallID != calls[0].ID || sent[3].Content != "Lima: sun" || sent[2].ToolCallID != calls[2].ID || sent[7].ToolCallID != again[0].ID {
		t.Errorf("results sent: %s", mustJSON(t, sent[2:8]))
	}
	if mustJSON(t, res.Messages[:len(history)]) != mustJSON(t, sent[:len(history)]) {
		t.Errorf("the transcript's history is not what was sent")
	}
}
