package agentloop_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// uncompilableTools is panicky whose tools' input schema does not compile
// (a pattern that is not RE2: a lookahead).
type uncompilableTools struct{ *panicky }

func (uncompilableTools) Tools() []toolcache.Tool {
	schema := json.RawMessage(`{"type":"object","properties":{"p":{"type":"string","pattern":"(?=x)"}}}`)
	return []toolcache.Tool{{Name: "ok", Original: "ok", Server: "srv", Description: "Tool ok.", InputSchema: schema, Parameters: schema}}
}

// TestUncompilableSchemaLogged: a tool whose input schema does not compile
// has its calls sent to its server unchecked (documented); nothing said
// so. The worker's log now says it once per tool of a catalog, whatever
// the number of calls.
func TestUncompilableSchemaLogged(t *testing.T) {
	t.Parallel()
	var log lockedBuffer
	cfg := agentloop.Config{Logger: slog.New(slog.NewTextHandler(&log, nil))}
	tools := uncompilableTools{&panicky{}}
	s := llmtest.NewServer(t,
		toolReply(call("ok", `{"p":"a"}`), call("ok", `{"p":"b"}`)), toolReply(call("ok", `{"p":"c"}`)), textReply("done"))
	res, err := newLoop(t, s, cfg).Run(t.Context(), agentloop.Input{JobID: "j", Task: "go", Tools: tools, Mode: agentloop.ModeFull})
	if err != nil || res.Answer != "done" {
		t.Fatalf("%v %+v", err, res)
	}
	if n := tools.count("ok"); n != 3 {
		t.Errorf("ok ran %d times, want 3 (unchecked, not refused)", n)
	}
	const want = "a tool's input schema does not compile; its calls go to its server unchecked"
	if got := log.String(); strings.Count(got, want) != 1 || !strings.Contains(got, "tool=ok server=srv") {
		t.Errorf("log: want the warning once, naming the tool and server:\n%s", got)
	}
}
