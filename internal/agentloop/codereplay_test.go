package agentloop_test

import (
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// A worker killed in round 2, after round 1's execute_code call had
// completed and published its events: the next attempt (from the journal
// alone) runs round 1's script again to rebuild its result (the same:
// Date.now, new Date() and Math.random read what they read then), and
// publishes none of that call's events again (tool.call, tool.result, nor
// those of its inner calls, one of them refused as invalid), as for a
// direct call an earlier attempt completed. Round 2's script, which did
// not complete, publishes its events.
func TestCompletedCodeCallNotPublishedAgain(t *testing.T) {
	t.Parallel()
	fx, tools, store, ctx1 := dyingEffects(t, func(arg string) bool { return arg == "kill" })
	first := `const t = Date.now(); await tools.write({arg: "a"});
try { await tools.write({arg: 7}) } catch (e) { console.log("invalid") }
return (await tools.read({arg: "x"})) + " at " + t + " " + Math.random() + " " + new Date().toISOString();`
	second := `await tools.write({arg: "kill"}); return "never"`
	s1 := llmtest.NewServer(t, toolReply(codeCall(first)), toolReply(codeCall(second)))
	var ev1 events
	in := agentloop.Input{JobID: "j", Task: "go", Tools: tools, Mode: agentloop.ModeCode, Sink: &ev1, Journal: newJournal(t, store, nil)}
	if _, err := newLoop(t, s1, agentloop.Config{}).Run(ctx1, in); err == nil {
		t.Fatal("the killed attempt succeeded")
	}
	firstResult := ""
	for _, e := range ev1.of(agentloop.EventToolResult) {
		if e.Data["name"] == agentloop.ToolExecuteCode {
			firstResult, _ = e.Data["output"].(string)
			break
		}
	}
	if !strings.Contains(firstResult, "read x done at ") {
		t.Fatalf("round 1's execute_code result: %q", firstResult)
	}

	fx.onWrite = nil
	s2 := llmtest.NewServer(t, textReply("done"))
	var ev events
	in.Sink = &ev
	in.Journal = newJournal(t, &dyingStore{m: store.snapshot()}, store.snapshot())
	res, err := newLoop(t, s2, agentloop.Config{}).Run(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if got := toolMessages(res.Messages)[0].Content; got != firstResult {
		t.Errorf("round 1's script gave %q on replay, %q the first time", got, firstResult)
	}
	if fx.count("write:a") != 1 {
		t.Errorf("write a ran %d times", fx.count("write:a"))
	}
	for _, typ := range []string{agentloop.EventToolCall, agentloop.EventToolResult, agentloop.EventToolValidationFailed} {
		for _, e := range ev.of(typ) {
			if e.Round == 1 {
				t.Errorf("round 1 published again: %s %v", typ, e.Data)
			}
		}
	}
	// Round 2's script: its execute_code call, and its write, interrupted.
	var round2 []string
	for _, e := range ev.all {
		if e.Round == 2 && (e.Type == agentloop.EventToolCall || e.Type == agentloop.EventToolResult || e.Type == agentloop.EventToolInterrupted) {
			round2 = append(round2, e.Type+" "+e.Data["name"].(string))
		}
	}
	want := "tool.call execute_code, tool.call write, tool.interrupted write, tool.result write, tool.result execute_code"
	if strings.Join(round2, ", ") != want {
		t.Errorf("round 2 events:\n %s\nwant\n %s", strings.Join(round2, ", "), want)
	}
}
