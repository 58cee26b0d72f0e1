package agentloop_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/reflect"
)

// Local servers (and some hosted ones) send empty ids, or the same id in
// every reply ("call_0"), and a continuation's history holds ids the loop
// generated in an earlier job. Tool results and reflection records are
// matched by id, so every call of a job must end up with an id no other
// call in its messages has.
func TestCallIDsUniqueAcrossRoundsAndHistory(t *testing.T) {
	t.Parallel()
	withID := func(id, name, args string) llm.ToolCall {
		c := call(name, args)
		c.ID = id
		return c
	}
	// An earlier job's reflected transcript: its call ids are what the
	// loop generates for empty ids.
	history := []llm.Message{
		{Role: llm.RoleUser, Content: "Weather in Rome?"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call00100", Type: "function", Function: llm.FunctionCall{Name: "get_weather", Arguments: `{"city":"Rome"}`}}}},
		{Role: llm.RoleTool, ToolCallID: "call00100", Content: "weather in Rome: 21c, sunny"},
		{Role: llm.RoleAssistant, Content: "Sunny."},
	}
	// The same job reflected: its call_tool call became the real call, under
	// the id the model's call had.
	reflectedHistory := slices.Clone(history)
	reflectedHistory[1].ToolCalls = []llm.ToolCall{{ID: "call00101", Type: "function", Function: llm.FunctionCall{Name: "get_weather", Arguments: `{"city":"Rome"}`}}}
	reflectedHistory[2].ToolCallID = "call00101"
	for _, tc := range []struct {
		name    string
		history []llm.Message
		replies []llmtest.Reply
	}{
		{"same id every round", nil, []llmtest.Reply{
			toolReply(withID("call_0", "call_tool", `{"name":"get_weather","arguments":{"city":"Oslo"}}`)),
			toolReply(withID("call_0", "call_tool", `{"name":"get_weather","arguments":{"city":"Bern"}}`)),
			textReply("done"),
		}},
		{"empty ids in a continuation", history, []llmtest.Reply{
			// llmtest fills empty ids; a body carries them empty, as sent.
			{Body: `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"","type":"function","function":{"name":"call_tool","arguments":"{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}"}}]}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`},
			textReply("done"),
		}},
		// A reflected history holds ids of real calls that were call_tool
		// calls; the new job's calls and records must not take them again.
		{"continuation of a reflected call_tool", reflectedHistory, []llmtest.Reply{
			// llmtest fills empty ids; a body carries them empty, as sent.
			{Body: `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"","type":"function","function":{"name":"call_tool","arguments":"{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}"}}]}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`},
			textReply("done"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, tc.replies...)
			l := newLoop(t, s, agentloop.Config{})
			res, err := l.Run(t.Context(), agentloop.Input{Task: "weather?", History: tc.history, Mode: agentloop.ModeSearch, Tools: tools})
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, m := range res.Messages {
				for _, c := range m.ToolCalls {
					if seen[c.ID] {
						t.Errorf("call id %q used twice: %s", c.ID, mustJSON(t, res.Messages))
					}
					seen[c.ID] = true
				}
			}
			if ig := reflect.Ignore(res.Records); len(ig) > 0 {
				t.Errorf("records not reflected: %+v", ig)
			}
			// The reflected transcript keeps the history as it was and
			// shows each real call once.
			refl := reflect.Rewrite(res.Messages, res.Records)
			if got := mustJSON(t, refl[:len(tc.history)]); len(tc.history) > 0 && got != mustJSON(t, tc.history) {
				t.Errorf("history rewritten:\n%s\nwant\n%s", got, mustJSON(t, tc.history))
			}
			ids := map[string]bool{}
			for _, m := range refl {
				for _, c := range m.ToolCalls {
					if ids[c.ID] {
						t.Errorf("reflected call id %q used twice: %s", c.ID, mustJSON(t, refl))
					}
					ids[c.ID] = true
				}
			}
			var calls []string
			for _, m := range refl[len(tc.history):] {
				for _, c := range m.ToolCalls {
					calls = append(calls, c.Function.Name+c.Function.Arguments)
				}
			}
			want := len(res.Records)
			if len(calls) != want || strings.Contains(strings.Join(calls, " "), "call_tool") {
				t.Errorf("reflected calls = %v, want %d real calls", calls, want)
			}
		})
	}
}

// Mistral's API and chat templates (vLLM, mlx) reject a tool call id that
// is not 9 letters or digits; the ids the loop makes up (for calls written
// into the content, or sent without an id) must pass.
func TestGeneratedCallIDsSuitMistral(t *testing.T) {
	t.Parallel()
	mistralID := regexp.MustCompile(`^[a-zA-Z0-9]{9}$`)
	for _, tc := range []struct{ name, body string }{
		{"mistral content call", `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Lima"}}, {"name": "get_weather", "arguments": {"city": "Quito"}}]`},
		{"empty ids", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			first := textReply(tc.body)
			if tc.body == "" {
				first = llmtest.Reply{Body: `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Lima\"}"}},{"id":"","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Quito\"}"}}]}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`}
			}
			s := llmtest.NewServer(t, first, textReply("sunny"))
			l := newLoop(t, s, agentloop.Config{})
			if _, err := l.Run(t.Context(), agentloop.Input{Task: "go", Tools: tools, Mode: agentloop.ModeFull}); err != nil {
				t.Fatal(err)
			}
			msgs := s.Requests()[1].Messages
			asst := msgs[len(msgs)-3]
			if len(asst.ToolCalls) != 2 {
				t.Fatalf("assistant = %s", mustJSON(t, asst))
			}
			for i, c := range asst.ToolCalls {
				if !mistralID.MatchString(c.ID) || msgs[len(msgs)-2+i].ToolCallID != c.ID {
					t.Errorf("call id %q (result answers %q)", c.ID, msgs[len(msgs)-2+i].ToolCallID)
				}
			}
		})
	}
}
