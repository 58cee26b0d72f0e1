package agentloop_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// A job cancelled, or timed out, while its tools run (a long MCP call)
// ends at once: the running calls see the context end, the round does not
// enter history, and no further request is sent.
func TestCancelDuringToolCall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		timeout  bool
		wantStop string
		wantErr  error
	}{
		{"cancel", false, agentloop.StopCancelled, context.Canceled},
		{"timeout", true, agentloop.StopTimeout, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// meet waits for a second meet call that never comes.
			ts := testServer{meetWant: 2, meetAll: make(chan struct{})}
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t,
				toolReply(call("echo", `{"text":"a"}`)),
				toolReply(call("meet", `{"id":"x"}`), call("echo", `{"text":"b"}`)),
				textReply("never asked"),
			)
			store := &checkpoints{}
			res, err := runUntilMeet(t, newLoop(t, s, agentloop.Config{}), tc.timeout,
				agentloop.Input{Task: "go", Tools: tools, Checkpoints: store, Mode: agentloop.ModeFull})
			if !errors.Is(err, tc.wantErr) || res.StopReason != tc.wantStop {
				t.Fatalf("err = %v, stop = %s", err, res.StopReason)
			}
			// The cut round is in the transcript, each call that did not
			// finish saying so (echo may have): a continuation must not
			// take meet, which may have run, for a call never made.
			// Before, the round was left out.
			// echo, meet's sibling, may have finished, been cut, or not
			// have started yet when the context ended.
			why := "Error: the job was cancelled "
			if tc.timeout {
				why = "Error: the job timed out "
			}
			cut := why + "while this call ran: it did not finish, and may or may not have taken effect"
			if res.Rounds != 1 || len(res.Messages) != 6 || !strings.HasPrefix(res.Messages[4].Content, cut) ||
				(res.Messages[5].Content != "b" && !strings.HasPrefix(res.Messages[5].Content, cut) &&
					res.Messages[5].Content != why+"before this call started: it did not run") {
				t.Errorf("rounds %d, messages %s", res.Rounds, mustJSON(t, res.Messages))
			}
			if n := len(s.Requests()); n != 2 {
				t.Errorf("%d requests, want 2", n)
			}
			if len(store.states) != 1 {
				t.Errorf("%d checkpoints, want 1 (the interrupted round is not saved)", len(store.states))
			}
		})
	}
}

// runUntilMeet runs l on in until the testServer's meet tool is called
// (it waits for a second meet that never comes), then ends the job's
// context: a cancel, or with timeout a deadline.
func runUntilMeet(t *testing.T, l *agentloop.Loop, timeout bool, in agentloop.Input) (*agentloop.Result, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	runCtx, end := context.Context(ctx), cancel
	if timeout {
		d := newExpiringContext(ctx)
		runCtx, end = d, d.expire
	}
	started := make(chan struct{}, 4)
	in.Sink = agentloop.SinkFunc(func(_ context.Context, e agentloop.Event) {
		if e.Type == agentloop.EventToolCall && e.Data["name"] == "meet" {
			started <- struct{}{}
		}
	})
	done := make(chan struct{})
	var (
		res *agentloop.Result
		err error
	)
	go func() {
		defer close(done)
		res, err = l.Run(runCtx, in)
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("meet never called")
	}
	end()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the context ended during a tool call")
	}
	return res, err
}
