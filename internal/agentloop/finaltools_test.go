package agentloop_test

import (
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// The last request (max_rounds reached) offers no tools; a server that
// refuses that while the history holds tool calls gets the request again
// with the tools and tool_choice "none". Before: the job failed at its
// end with the server's refusal (LiteLLM in front of Anthropic or
// Bedrock: "doesn't support tool calling without `tools=` param
// specified"), its rounds' work lost.
func TestFinalRequestGetsToolsWhenRequired(t *testing.T) {
	t.Parallel()
	const litellm = "litellm.UnsupportedParamsError: Anthropic doesn't support tool calling without `tools=` param specified. " +
		"Pass `tools=` param OR set `litellm.modify_params = True` // `litellm_settings::modify_params: True` to add dummy tool to the request."
	const bedrock = "The toolConfig field must be defined when using toolUse and toolResult content blocks."
	for _, tc := range []struct {
		name string
		// refuse answers the final request: "" lets it through.
		refuse       func(r llmtest.RecordedRequest) (int, string)
		wantRequests int
		wantErr      string // "" for the answer
	}{
		{name: "LiteLLM", refuse: func(r llmtest.RecordedRequest) (int, string) {
			if r.ToolsJSON == nil {
				return 400, litellm
			}
			return 0, ""
		}, wantRequests: 3},
		{name: "Bedrock", refuse: func(r llmtest.RecordedRequest) (int, string) {
			if r.ToolsJSON == nil {
				return 400, bedrock
			}
			return 0, ""
		}, wantRequests: 3},
		{name: "refused again", refuse: func(llmtest.RecordedRequest) (int, string) { return 400, litellm },
			wantRequests: 3, wantErr: "provider returned 400: litellm.UnsupportedParamsError"},
		{name: "another refusal is not retried", refuse: func(llmtest.RecordedRequest) (int, string) {
			return 400, "This model's maximum context length is 8192 tokens."
		}, wantRequests: 2, wantErr: "maximum context length"},
		{name: "a server taking it as it is", refuse: func(llmtest.RecordedRequest) (int, string) { return 0, "" }, wantRequests: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, toolReply(call("echo", `{"text":"a"}`)))
			s.Handle(func(r llmtest.RecordedRequest) llmtest.Reply {
				if status, msg := tc.refuse(r); status != 0 {
					return llmtest.Reply{Status: status, Content: msg}
				}
				return textReply("Partial answer.")
			})
			l := newLoop(t, s, agentloop.Config{})
			res, err := l.Run(t.Context(), agentloop.Input{Task: "go", Tools: tools, MaxRounds: 1, Mode: agentloop.ModeFull})
			reqs := s.Requests()
			if len(reqs) != tc.wantRequests {
				t.Fatalf("%d requests, want %d", len(reqs), tc.wantRequests)
			}
			if reqs[1].ToolsJSON != nil || reqs[1].ToolChoice != nil {
				t.Errorf("the final request offers tools at first: %s, %v", reqs[1].ToolsJSON, reqs[1].ToolChoice)
			}
			if len(reqs) == 3 && (string(reqs[2].ToolsJSON) != string(reqs[0].ToolsJSON) || reqs[2].ToolChoice != "none") {
				t.Errorf("the final request again: tools %s, tool_choice %v; want the job's tools and none", reqs[2].ToolsJSON, reqs[2].ToolChoice)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Answer != "Partial answer." || res.StopReason != agentloop.StopMaxRounds {
				t.Errorf("answer %q (%s)", res.Answer, res.StopReason)
			}
		})
	}
}
