package agentloop_test

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/reflect"
)

// mistralIDs answers as Mistral's API does: a request holding a tool call
// id that is not 9 letters or digits is refused; otherwise reply.
func mistralIDs(reply llmtest.Reply) func(llmtest.RecordedRequest) llmtest.Reply {
	ok := regexp.MustCompile(`^[a-zA-Z0-9]{9}$`)
	return func(r llmtest.RecordedRequest) llmtest.Reply {
		for _, m := range r.Messages {
			for _, c := range m.ToolCalls {
				if !ok.MatchString(c.ID) {
					return llmtest.Reply{Status: 400, Content: fmt.Sprintf("Tool call id was %s but must be a-z, A-Z, 0-9, with a length of 9.", c.ID)}
				}
			}
		}
		return reply
	}
}

// The reflected transcript of a code-mode job is history for a
// continuation, so its inner calls' ids must be ones every provider takes.
// Before, they were the execute_code call's id with "_<n>" after it, and a
// continuation on Mistral failed: "Tool call id was abcDEF123_1 but must
// be a-z, A-Z, 0-9, with a length of 9."
func TestCodeModeInnerCallIDsServeAsHistory(t *testing.T) {
	t.Parallel()
	var ts testServer
	tools := newToolSet(t, &ts, false)
	tc := codeCall(`const a = await tools.echo({text: "a"}); const b = await tools.echo({text: "b"}); return [a, b, await tools.echo({text: "c"})]`)
	tc.ID = "abcDEF123" // a Mistral id
	s := llmtest.NewServer(t, toolReply(tc))
	s.Handle(mistralIDs(textReply("done")))
	var ev events
	res, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{JobID: "j1", Task: "go", Tools: tools, Mode: agentloop.ModeCode, Sink: &ev})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 3 {
		t.Fatalf("%d records, want 3", len(res.Records))
	}
	seen := map[string]bool{tc.ID: true}
	var eventIDs []any
	for _, e := range ev.of(agentloop.EventToolResult) {
		if e.Data["from"] == agentloop.ToolExecuteCode {
			eventIDs = append(eventIDs, e.Data["call_id"])
		}
	}
	for i, r := range res.Records {
		if seen[r.ID] {
			t.Errorf("record %d: id %q used twice", i, r.ID)
		}
		seen[r.ID] = true
		if i < len(eventIDs) && eventIDs[i] != r.ID {
			t.Errorf("record %d has id %q, its event %v", i, r.ID, eventIDs[i])
		}
	}
	history := reflect.Rewrite(res.Messages, res.Records)
	for _, mode := range []agentloop.Mode{agentloop.ModeCode, agentloop.ModeFull} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			s2 := llmtest.NewServer(t)
			s2.Handle(mistralIDs(textReply("continued")))
			res2, err := newLoop(t, s2, agentloop.Config{}).Run(t.Context(), agentloop.Input{JobID: "j2", Task: "and then?", History: history, Tools: tools, Mode: mode})
			if err != nil {
				t.Fatalf("continuation: %v (history %s)", err, mustJSON(t, history))
			}
			if res2.Answer != "continued" {
				t.Errorf("answer %q", res2.Answer)
			}
		})
	}
}
