package clienttools

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/childtest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// childEnv names the test a child process runs in-process (see childtest).
const childEnv = "CLIENTTOOLS_PANIC_CHILD"

// TestHandlerPanicIsAToolError: a Serve handler that panics answers its
// call as a tool error quoting the panic's value (the worker does not
// wait out its timeout), OnPanic gets the stack, and the submitter's
// process and its other calls go on.
func TestHandlerPanicIsAToolError(t *testing.T) {
	t.Parallel()
	if !childtest.InChild(t, childEnv) {
		return
	}
	s := natstest.Start(t)
	worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
	var mu sync.Mutex
	var stacks []string
	h := func(ctx context.Context, name string, args json.RawMessage) (string, bool, error) {
		switch name {
		case "boom":
			var m map[string]int
			m["x"]++ //nolint:staticcheck // a nil map on purpose: a real runtime panic
		case "huge":
			panic(strings.Repeat("é", 10000))
		}
		return echo(ctx, name, args)
	}
	serve(t, submitter, "job-panic", testSecret, h, Options{OnPanic: func(_ error, stack []byte) {
		mu.Lock()
		stacks = append(stacks, string(stack))
		mu.Unlock()
	}})
	// The timeout is long: an answer that never came would fail the test
	// by its deadline, not pass it.
	c := newCaller(t, worker, "job-panic", testSecret, Options{Timeout: time.Minute})
	for _, tc := range []struct{ tool, want string }{
		{"boom", "the client tool boom failed inside the submitter: assignment to entry in nil map"},
		{"huge", "the client tool huge failed inside the submitter: " + strings.Repeat("é", 250) + "... (20000 bytes)"},
		{"echo", "echo {}"},
	} {
		res, err := c.Call(natstest.Context(t), tc.tool, json.RawMessage(`{}`))
		if err != nil {
			t.Fatalf("%s: %v", tc.tool, err)
		}
		if res.Text != tc.want || res.IsError != (tc.tool != "echo") {
			t.Errorf("%s: %q (isError %v), want %q", tc.tool, res.Text, res.IsError, tc.want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(stacks) != 2 || !strings.Contains(stacks[0], "panic_test.go") {
		t.Errorf("OnPanic got %d stacks: %v", len(stacks), stacks)
	}
}
