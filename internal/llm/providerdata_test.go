package llm_test

import (
	"encoding/json"
	"testing"

	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// What a server returns beside an assistant message or a call that it
// needs back with them: the reasoning of thinking-mode servers (DeepSeek,
// Kimi, GLM, vLLM, llama.cpp: reasoning_content; OpenRouter: reasoning,
// reasoning_details) and Gemini's thought signature (a call's
// extra_content). Each is read as it came and sent back verbatim with the
// message; null is as good as absent. Before: all were dropped, and
// DeepSeek ("Missing `reasoning_content` field in the assistant message"),
// Kimi, GLM and Gemini 3 ("Function call is missing a thought_signature")
// refused the request after the first tool call.
func TestProviderDataSentBack(t *testing.T) {
	t.Parallel()
	const call = `{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Lima\"}"}`
	for _, tc := range []struct {
		name, message string
		// want are the message's (and its first call's) fields as sent
		// back, compact; absent ones are not sent.
		want map[string]string
	}{
		{name: "reasoning_content", message: `{"role":"assistant","content":null,"reasoning_content":"The user wants Lima.","tool_calls":[` + call + `}]}`,
			want: map[string]string{"reasoning_content": `"The user wants Lima."`}},
		{name: "reasoning and reasoning_details", message: `{"role":"assistant","content":"","reasoning":"Lima, then.",` +
			`"reasoning_details":[{"type":"reasoning.encrypted","data":"gAAAA==","id":"rs_1","format":"openai-responses-v1","index":0}],"tool_calls":[` + call + `}]}`,
			want: map[string]string{"reasoning": `"Lima, then."`, "reasoning_details": `[{"type":"reasoning.encrypted","data":"gAAAA==","id":"rs_1","format":"openai-responses-v1","index":0}]`}},
		{name: "thought signature", message: `{"role":"assistant","tool_calls":[` + call + `,"extra_content":{"google":{"thought_signature":"CrICAdHt"}}}]}`,
			want: map[string]string{"extra_content": `{"google":{"thought_signature":"CrICAdHt"}}`}},
		{name: "nulls", message: `{"role":"assistant","content":null,"reasoning_content":null,"reasoning":null,"tool_calls":[` + call + `,"extra_content":null}]}`,
			want: map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, llmtest.Reply{Body: completion(tc.message, "tool_calls")}, llmtest.Reply{Content: "Lima is sunny."})
			c := newClient(t, s, nil)
			req := userRequest()
			resp, err := c.Complete(testCtx(t), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Message.ToolCalls) != 1 || resp.Message.ToolCalls[0].Function.Arguments != `{"city":"Lima"}` {
				t.Fatalf("calls %+v", resp.Message.ToolCalls)
			}
			req.Messages = append(req.Messages, resp.Message, llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Content: "21c"})
			if _, err := c.Complete(testCtx(t), req); err != nil {
				t.Fatal(err)
			}
			var sent struct {
				Messages []map[string]json.RawMessage `json:"messages"`
			}
			if err := json.Unmarshal(s.Requests()[1].Raw, &sent); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			asst := sent.Messages[1]
			var calls []map[string]json.RawMessage
			if err := json.Unmarshal(asst["tool_calls"], &calls); err != nil || len(calls) != 1 {
				t.Fatalf("tool_calls sent %s (%v)", asst["tool_calls"], err)
			}
			for _, k := range []string{"reasoning_content", "reasoning", "reasoning_details"} {
				if v, ok := asst[k]; ok {
					got[k] = string(v)
				}
			}
			if v, ok := calls[0]["extra_content"]; ok {
				got["extra_content"] = string(v)
			}
			if len(got) != len(tc.want) {
				t.Errorf("sent back %v, want %v", got, tc.want)
			}
			for k, want := range tc.want {
				if got[k] != want {
					t.Errorf("%s sent back as %s, want %s", k, got[k], want)
				}
			}
		})
	}
}
