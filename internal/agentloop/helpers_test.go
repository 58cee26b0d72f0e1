package agentloop_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// newLoop returns a Loop talking to s through the real llm client.
func newLoop(t *testing.T, s *llmtest.Server, cfg agentloop.Config) *agentloop.Loop {
	t.Helper()
	c, err := llm.New(llm.Config{BaseURL: s.URL(), Model: "test-model", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	cfg.LLM = c
	l, err := agentloop.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// call is a scripted tool call.
func call(name, args string) llm.ToolCall {
	return llm.ToolCall{Function: llm.FunctionCall{Name: name, Arguments: args}}
}

func toolReply(calls ...llm.ToolCall) llmtest.Reply { return llmtest.Reply{ToolCalls: calls} }

func textReply(s string) llmtest.Reply { return llmtest.Reply{Content: s} }

// events records every event, safe for the loop's concurrent emits.
type events struct {
	mu  sync.Mutex
	all []agentloop.Event
}

func (e *events) Emit(_ context.Context, ev agentloop.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

func (e *events) of(typ string) []agentloop.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []agentloop.Event
	for _, ev := range e.all {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// checkpoints keeps every saved state.
type checkpoints struct {
	mu     sync.Mutex
	states []agentloop.Checkpoint
}

func (c *checkpoints) Save(_ context.Context, s agentloop.Checkpoint) error {
	c.mu.Lock()
	c.states = append(c.states, s)
	c.mu.Unlock()
	return nil
}

// toolMessages returns the role "tool" messages of msgs.
func toolMessages(msgs []llm.Message) []llm.Message {
	var out []llm.Message
	for _, m := range msgs {
		if m.Role == llm.RoleTool {
			out = append(out, m)
		}
	}
	return out
}

// mustJSON is compact JSON of v.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// toolByName finds a tool of a recorded request.
func toolByName(tools []llm.Tool, name string) (llm.Tool, bool) {
	i := slices.IndexFunc(tools, func(t llm.Tool) bool { return t.Name == name })
	if i < 0 {
		return llm.Tool{}, false
	}
	return tools[i], true
}

// compact compacts JSON text for comparisons.
func compact(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return mustJSON(t, v)
}

// withoutNames drops the informational Name of tool messages, which the
// llm client does not send.
func withoutNames(msgs []llm.Message) []llm.Message {
	out := slices.Clone(msgs)
	for i := range out {
		out[i].Name = ""
	}
	return out
}

// completerFunc is a Completer for constructor tests that never run.
type completerFunc func(context.Context, llm.Request) (llm.Response, error)

func (f completerFunc) Complete(ctx context.Context, r llm.Request) (llm.Response, error) {
	return f(ctx, r)
}

func noCaller(context.Context, string, json.RawMessage) (string, error) { return "", nil }
