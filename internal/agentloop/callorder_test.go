package agentloop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// resultSignal records events and closes done when the tool.result of
// the call named name is emitted.
type resultSignal struct {
	events
	name string
	once sync.Once
	done chan struct{}
}

func (r *resultSignal) Emit(ctx context.Context, ev agentloop.Event) {
	r.events.Emit(ctx, ev)
	if ev.Type == agentloop.EventToolResult && ev.Data["name"] == r.name {
		r.once.Do(func() { close(r.done) })
	}
}

// A round's parallel calls run concurrently, and each published its
// tool.call from its own goroutine: the live events could list them in
// another order than the model gave them (and the transcript keeps), as
// seen in `make demo` (add before get_weather). tool.call events come in
// the model's order; tool.result events as calls finish, each with its
// call_id; the tool messages keep the model's order.
func TestParallelCallEventsInModelOrder(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object"}`)
	// The race showed only now and then: run the round many times.
	for i := range 30 {
		slow, fast := call("slow", `{}`), call("fast", `{}`)
		slow.ID, fast.ID = fmt.Sprintf("call_slow_%d", i), fmt.Sprintf("call_fast_%d", i)
		s := llmtest.NewServer(t, toolReply(slow, fast), textReply("done"))
		sink := &resultSignal{name: "fast", done: make(chan struct{})}
		res, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{Sink: sink,
			Task: "go", Mode: agentloop.ModeFull,
			ClientTools: []clienttools.Decl{{Name: "slow", InputSchema: schema}, {Name: "fast", InputSchema: schema}},
			ClientCaller: func(ctx context.Context, name string, _ json.RawMessage) (string, error) {
				if name == "slow" {
					// Finishes after fast has: its result comes second.
					select {
					case <-sink.done:
					case <-ctx.Done():
						return "", ctx.Err()
					case <-time.After(20 * time.Second):
						return "", fmt.Errorf("fast's result never came")
					}
				}
				return name + " done", nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		ids := func(typ string) []string {
			var out []string
			for _, ev := range sink.of(typ) {
				out = append(out, fmt.Sprint(ev.Data["call_id"]))
			}
			return out
		}
		if got, want := fmt.Sprint(ids(agentloop.EventToolCall)), fmt.Sprint([]string{slow.ID, fast.ID}); got != want {
			t.Fatalf("run %d: tool.call events for %s, want the model's order %s", i, got, want)
		}
		if got, want := fmt.Sprint(ids(agentloop.EventToolResult)), fmt.Sprint([]string{fast.ID, slow.ID}); got != want {
			t.Fatalf("run %d: tool.result events for %s, want %s (as the calls finished)", i, got, want)
		}
		var msgs []string
		for _, m := range toolMessages(res.Messages) {
			msgs = append(msgs, m.ToolCallID+"="+m.Content)
		}
		if got, want := fmt.Sprint(msgs), fmt.Sprint([]string{slow.ID + "=slow done", fast.ID + "=fast done"}); got != want {
			t.Fatalf("run %d: tool messages %s, want the model's order %s", i, got, want)
		}
	}
}
