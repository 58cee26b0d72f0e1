package agentrun_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/agentrun"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// A provider's reasoning and call data are kept as they came (thinking
// servers want them back verbatim), and byte-level reasoning models (Kimi,
// GLM, MiMo) emit half a UTF-16 surrogate pair in them, escaped alone
// ("\ud83d"). The job door refuses such an escape anywhere in a job, so
// the stored (reflected) transcript, given back as a continuation's
// history, was refused as "job is not JSON: a high surrogate with no low
// one after it" although the worker had written it. The reflected
// transcript now holds U+FFFD there (what a JSON decoder reads for it),
// the raw one what came, and a continuation runs with it; escapes of
// whole pairs and an escaped backslash before "ud83d" are left alone.
func TestReflectedHalfSurrogatesServeAsHistory(t *testing.T) {
	t.Parallel()
	const (
		half  = `half \ud83d and \udc00 \\ud83d \ud83d\ude00`
		fixed = `half \ufffd and \ufffd \\ud83d \ud83d\ude00`
	)
	for _, tc := range []struct {
		name    string
		message string // members of the reply's message beside content and tool_calls
		call    string // members of its tool call beside id, type and function
	}{
		{"reasoning_content", `"reasoning_content":"` + half + `",`, ``},
		{"reasoning", `"reasoning":"` + half + `",`, ``},
		{"reasoning_details", `"reasoning_details":[{"type":"reasoning.text","text":"` + half + `","signature":"sig"}],`, ``},
		{"extra_content", ``, `"extra_content":{"google":{"thought_signature":"` + half + `"}},`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reply := `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls",` +
				`"message":{"role":"assistant","content":null,` + tc.message +
				`"tool_calls":[{"id":"c1","type":"function",` + tc.call + `"function":{"name":"echo","arguments":"{\"text\":\"a\"}"}}]}}],` +
				`"usage":{"prompt_tokens":1,"completion_tokens":1}}`
			pool := corpusPool(t, map[string]json.RawMessage{"echo": json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)})
			h := start(t, agentloop.Config{}, agentrun.Config{Pool: pool},
				llmtest.Reply{Body: reply}, llmtest.Reply{Content: "done"}, llmtest.Reply{Content: "continued"})
			if st := h.run(t, &jobs.Job{ID: "first", Task: "go", ToolMode: "full"}); st.Status != jobs.StatusSucceeded {
				t.Fatalf("first job: %s %s", st.Status, st.Error)
			}
			// The second request sent the data back as it came.
			if reqs := h.model.Requests(); len(reqs) != 2 || !strings.Contains(string(reqs[1].Raw), half) {
				t.Fatalf("the first job's second request did not send %s back verbatim", tc.name)
			}
			if _, b := h.transcript(t, "first", true); !strings.Contains(b, half) {
				t.Errorf("the raw transcript does not keep %s as it came: %s", tc.name, b)
			}
			tr, b := h.transcript(t, "first", false)
			if !strings.Contains(b, fixed) {
				t.Errorf("the reflected transcript's %s is not %s: %s", tc.name, fixed, b)
			}
			st := h.run(t, &jobs.Job{ID: "second", Task: "and then?", ToolMode: "full", History: tr.Messages})
			if st.Status != jobs.StatusSucceeded || st.Result == nil || st.Result.Answer != "continued" {
				t.Fatalf("continuation: %s %s", st.Status, st.Error)
			}
			if reqs := h.model.Requests(); len(reqs) != 3 || !strings.Contains(string(reqs[2].Raw), fixed) {
				t.Errorf("the continuation's request lacks the history's %s", tc.name)
			}
		})
	}
}
