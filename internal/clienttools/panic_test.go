package clienttools

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/natstest"
)

// childEnv names the test a child process runs in-process (see inChild).
const childEnv = "CLIENTTOOLS_PANIC_CHILD"

// inChild runs the calling test's body in a child process of the test
// binary and fails the test with the child's output when it fails: a
// panic in a goroutine Serve starts ends the whole process. In the child
// (the environment names the test), it returns true and the body runs.
func inChild(t *testing.T) bool {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		return true
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		text := string(out)
		if i := strings.Index(text, "\npanic: "); i >= 0 {
			text = text[i+1:]
		} else if i := strings.Index(text, "--- FAIL"); i >= 0 {
			text = text[i:]
		}
		t.Fatalf("the test process failed (%v):\n%.4000s", err, text)
	}
	return false
}

// TestHandlerPanicIsAToolError: a Serve handler that panics answers its
// call as a tool error quoting the panic's value (the worker does not
// wait out its timeout), OnPanic gets the stack, and the submitter's
// process and its other calls go on.
func TestHandlerPanicIsAToolError(t *testing.T) {
	t.Parallel()
	if !inChild(t) {
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
