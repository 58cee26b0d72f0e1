package agentloop_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/reflect"
)

// A job cancelled or timed out while a script's inner call ran: the
// reflected transcript, a continuation's history, shows the script's
// inner calls in place of the execute_code call, so its cut note was not
// there, and the cut call said "Error: ... tools/call: context canceled",
// a call that failed, to be made again, though it may have taken effect.
// It now says what a cut direct call says; an inner call that finished
// keeps its result, and both transcripts are history a model takes.
func TestCancelDuringCodeInnerCall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		timeout bool
		note    string
	}{
		{"cancel", false, "Error: the job was cancelled while this call ran: it did not finish, and may or may not have taken effect"},
		{"timeout", true, "Error: the job timed out while this call ran: it did not finish, and may or may not have taken effect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := testServer{meetWant: 2, meetAll: make(chan struct{})} // meet waits for a second meet call that never comes
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t,
				toolReply(call(agentloop.ToolExecuteCode, `{"code":"await tools.echo({text:'a'}); await tools.meet({id:'x'}); await tools.echo({text:'z'})"}`)),
				textReply("never asked"),
			)
			res, err := runUntilMeet(t, newLoop(t, s, agentloop.Config{}), tc.timeout,
				agentloop.Input{Task: "go", Tools: tools, Mode: agentloop.ModeCode})
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v", err)
			}
			if err := llm.CheckHistory(res.Messages); err != nil {
				t.Errorf("raw transcript: %v", err)
			}
			reflected := reflect.Rewrite(res.Messages, res.Records)
			if err := llm.CheckHistory(reflected); err != nil {
				t.Errorf("reflected transcript: %v", err)
			}
			results := map[string]string{} // the inner calls' results, by tool
			for _, m := range reflected {
				if m.Role == llm.RoleTool {
					results[m.Name] += m.Content
				}
			}
			if results["echo"] != "a" || !strings.HasPrefix(results["meet"], tc.note) {
				t.Errorf("reflected results %q, want echo's a, and meet's %q", results, tc.note)
			}
		})
	}
}

// A script whose own wall time ends while an inner call runs, in a job
// that goes on: the inner call's record, a continuation's history, said
// "Error: ... context deadline exceeded", a call that failed, to be made
// again, though it may have taken effect. It now says so.
func TestCodeWallTimeDuringInnerCall(t *testing.T) {
	t.Parallel()
	ts := testServer{meetWant: 2, meetAll: make(chan struct{})} // meet waits for a second meet that never comes
	tools := newToolSet(t, &ts, false)
	s := llmtest.NewServer(t,
		toolReply(call(agentloop.ToolExecuteCode, `{"code":"await tools.meet({id:'x'})"}`)),
		textReply("done"),
	)
	cfg := agentloop.Config{}
	cfg.CodeLimits.WallTime = 3 * time.Second // the call starts well within it, even on a busy machine
	res, err := newLoop(t, s, cfg).Run(t.Context(), agentloop.Input{Task: "go", Tools: tools, Mode: agentloop.ModeCode})
	if err != nil {
		t.Fatal(err)
	}
	reflected := reflect.Rewrite(res.Messages, res.Records)
	if err := llm.CheckHistory(reflected); err != nil {
		t.Errorf("reflected transcript: %v", err)
	}
	results := map[string]string{}
	for _, m := range reflected {
		if m.Role == llm.RoleTool {
			results[m.Name] += m.Content
		}
	}
	const note = "Error: the code's execution ended while this call ran: it did not finish, and may or may not have taken effect"
	if !strings.HasPrefix(results["meet"], note) {
		t.Errorf("reflected results %q, want meet's %q", results, note)
	}
}
