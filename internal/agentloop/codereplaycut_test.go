package agentloop_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/codemode"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// diesAfter is a code runner whose execution ends after its first n
// inner calls, as a code process SIGKILLed (the kernel's OOM killer, an
// operator) ends one: the code's later calls are never made.
type diesAfter struct{ n int }

func (d diesAfter) Run(ctx context.Context, c *codemode.Catalog, code string, host codemode.Host, lim codemode.Limits) codemode.Output {
	return c.Run(ctx, code, cutHost{Host: host, n: d.n}, lim)
}

type cutHost struct {
	codemode.Host
	n int
}

func (h cutHost) Call(ctx context.Context, seq int, name string, args json.RawMessage) (codemode.Result, error) {
	if seq >= h.n {
		return codemode.Result{}, codemode.Abort(errors.New("code mode: the code's process ended without a result (signal: killed)"))
	}
	return h.Host.Call(ctx, seq, name, args)
}

// TestReplayedCodeCallMakesNoNewCalls: round 1's script was cut after
// its first call (its process killed); the model read that error and
// went on; the worker was then killed in round 2. The next attempt runs
// round 1's script again to rebuild its records, and that run got past
// the cut: the write the first execution never made ran now, in a round
// the model had already seen end, and the result replayed differed from
// the one the model read. A completed execution's replay now makes no
// call the execution did not make, and gives the result the model read.
func TestReplayedCodeCallMakesNoNewCalls(t *testing.T) {
	t.Parallel()
	fx, tools, store, ctx1 := dyingEffects(t, func(arg string) bool { return arg == "kill" })
	first := `const out = [];
for (const a of ["a", "b"]) {
  try { out.push(await tools.write({arg: a})) } catch (e) { out.push("failed: " + e.message) }
}
return out.join("; ");`
	second := `await tools.write({arg: "kill"}); return "never"`
	s1 := llmtest.NewServer(t, toolReply(codeCall(first)), toolReply(codeCall(second)))
	in := agentloop.Input{JobID: "j", Task: "go", Tools: tools, Mode: agentloop.ModeCode, Sink: &events{}, Journal: newJournal(t, store, nil)}
	if _, err := newLoop(t, s1, agentloop.Config{CodeRunner: diesAfter{1}}).Run(ctx1, in); err == nil {
		t.Fatal("the killed attempt succeeded")
	}
	reqs := s1.Requests()
	seen := toolMessages(reqs[len(reqs)-1].Messages)[0].Content // round 1's result, as the model read it
	if !strings.Contains(seen, "signal: killed") || fx.count("write:a") != 1 || fx.count("write:b") != 0 {
		t.Fatalf("round 1's execution: %q; write a ran %d times, b %d", seen, fx.count("write:a"), fx.count("write:b"))
	}

	fx.onWrite = nil
	s2 := llmtest.NewServer(t, textReply("done"))
	in.Sink = &events{}
	in.Journal = newJournal(t, &dyingStore{m: store.snapshot()}, store.snapshot())
	res, err := newLoop(t, s2, agentloop.Config{}).Run(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if n := fx.count("write:b"); n != 0 {
		t.Errorf("write b, which round 1's execution never made, ran %d times in its replay", n)
	}
	if n := fx.count("write:a"); n != 1 {
		t.Errorf("write a ran %d times", n)
	}
	if got := toolMessages(res.Messages)[0].Content; got != seen {
		t.Errorf("round 1's result on replay:\n %q\nthe model read:\n %q", got, seen)
	}
	var recorded []string
	for _, r := range res.Records {
		recorded = append(recorded, r.Name+" "+string(r.Input))
	}
	if want := []string{`write {"arg":"a"}`, `write {"arg":"kill"}`}; strings.Join(recorded, ", ") != strings.Join(want, ", ") {
		t.Errorf("records %v, want %v", recorded, want)
	}
}
