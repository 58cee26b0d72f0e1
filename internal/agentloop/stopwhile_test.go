package agentloop_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// signal closes a channel at the first event of a type.
type signal struct {
	typ   string
	once  chan struct{}
	close sync.Once
}

func (s *signal) Emit(_ context.Context, ev agentloop.Event) {
	if ev.Type == s.typ {
		s.close.Do(func() { close(s.once) })
	}
}

// A job whose context ended said only "context deadline exceeded" (the
// worker: "job timed out after 8s"): a model that never answered and a
// tool that never returned read the same (seen end to end with bin/worker
// and a scripted model that held its reply). The error now says what the
// job was at, and still wraps the context's error.
func TestStopSaysWhatWasCutShort(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		replies func(block chan struct{}) []llmtest.Reply
		until   string // the event after which the context ends; "": the second request
		want    string
	}{
		{
			name: "the model's reply",
			replies: func(block chan struct{}) []llmtest.Reply {
				return []llmtest.Reply{toolReply(call("echo", `{"text":"a"}`)), {Content: "never", Block: block}}
			},
			want: "context canceled while waiting for the model's reply in round 2",
		},
		{
			name: "a tool call",
			replies: func(chan struct{}) []llmtest.Reply {
				return []llmtest.Reply{toolReply(call("echo", `{"text":"a"}`), call("meet", `{"id":"1"}`))}
			},
			until: agentloop.EventToolCall,
			want:  "context canceled while running the tool calls of round 1 (echo, meet)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := testServer{meetWant: 2, meetAll: make(chan struct{})}
			tools := newToolSet(t, &ts, false)
			block := make(chan struct{})
			t.Cleanup(func() { close(block) })
			s := llmtest.NewServer(t, tc.replies(block)...)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			sig := &signal{typ: tc.until, once: make(chan struct{})}
			if tc.until == "" {
				go func() {
					if s.WaitRequests(ctx, 2) == nil {
						sig.Emit(ctx, agentloop.Event{})
					}
				}()
			}
			go func() {
				select {
				case <-sig.once:
					cancel()
				case <-time.After(30 * time.Second):
				}
			}()
			_, err := newLoop(t, s, agentloop.Config{}).Run(ctx, agentloop.Input{Task: "go", Mode: agentloop.ModeFull, Tools: tools, Sink: sig})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q, want it to say %q", err, tc.want)
			}
		})
	}
}
