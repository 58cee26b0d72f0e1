package agentloop_test

import (
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// mistralOrder answers as Mistral's API and chat format do: a user message
// right after a tool message is refused; otherwise reply(r).
func mistralOrder(reply func(r llmtest.RecordedRequest) llmtest.Reply) func(llmtest.RecordedRequest) llmtest.Reply {
	return func(r llmtest.RecordedRequest) llmtest.Reply {
		for i := 1; i < len(r.Messages); i++ {
			if r.Messages[i].Role == llm.RoleUser && r.Messages[i-1].Role == llm.RoleTool {
				return llmtest.Reply{Status: 400, Content: "Unexpected role 'user' after role 'tool'"}
			}
		}
		return reply(r)
	}
}

// The loop's notes are user messages; after tool results, a server that
// refuses a user message there gets the request again with the note
// appended to the last tool result. Before: the job failed with "provider
// returned 400: Unexpected role 'user' after role 'tool'": every job that
// used up its max_rounds, and any nudge or retry after a round.
func TestNotesAfterToolResults(t *testing.T) {
	t.Parallel()
	answer := func(llmtest.RecordedRequest) llmtest.Reply { return textReply("Partial answer.") }
	for _, tc := range []struct {
		name      string
		replies   []llmtest.Reply // before the handler
		handler   func(llmtest.RecordedRequest) llmtest.Reply
		maxRounds int
		// wantRequests; wantFolded is the note expected at the end of the
		// last request's last tool message ("" for none folded).
		wantRequests int
		wantFolded   string
		wantStop     string
		wantErr      string
	}{
		{name: "the final request", replies: []llmtest.Reply{toolReply(call("echo", `{"text":"a"}`))}, handler: mistralOrder(answer),
			maxRounds: 1, wantRequests: 3, wantFolded: "You have used all the tool rounds", wantStop: agentloop.StopMaxRounds},
		{name: "a nudge after a round", replies: []llmtest.Reply{toolReply(call("echo", `{"text":"a"}`)), textReply("")}, handler: mistralOrder(answer),
			wantRequests: 4, wantFolded: "Your previous reply was empty.", wantStop: agentloop.StopFinalAnswer},
		{name: "a server taking the note as it is", replies: []llmtest.Reply{toolReply(call("echo", `{"text":"a"}`))}, handler: answer,
			maxRounds: 1, wantRequests: 2, wantStop: agentloop.StopMaxRounds},
		{name: "another refusal", replies: []llmtest.Reply{toolReply(call("echo", `{"text":"a"}`))},
			handler: func(llmtest.RecordedRequest) llmtest.Reply {
				return llmtest.Reply{Status: 400, Content: "Unexpected role 'assistant' after role 'assistant'"}
			}, maxRounds: 1, wantRequests: 2, wantErr: "Unexpected role 'assistant'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, tc.replies...)
			s.Handle(tc.handler)
			l := newLoop(t, s, agentloop.Config{})
			res, err := l.Run(t.Context(), agentloop.Input{Task: "go", Tools: tools, MaxRounds: tc.maxRounds, Mode: agentloop.ModeFull})
			reqs := s.Requests()
			if len(reqs) != tc.wantRequests {
				t.Fatalf("%d requests, want %d (err %v)", len(reqs), tc.wantRequests, err)
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
			if res.Answer != "Partial answer." || res.StopReason != tc.wantStop {
				t.Errorf("answer %q (%s)", res.Answer, res.StopReason)
			}
			last := reqs[len(reqs)-1].Messages
			end := last[len(last)-1]
			if tc.wantFolded == "" {
				return
			}
			if end.Role != llm.RoleTool || !strings.HasPrefix(end.Content, "a\n\n"+tc.wantFolded) {
				t.Errorf("last message sent %s, want the tool result with the note after it", mustJSON(t, end))
			}
			// History is not rewritten: the tool result stays the tool's.
			for _, m := range toolMessages(res.Messages) {
				if m.Content != "a" {
					t.Errorf("transcript tool message %s", mustJSON(t, m))
				}
			}
		})
	}
}
