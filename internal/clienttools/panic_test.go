package clienttools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/childtest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// childEnv names the test a child process runs in-process (see childtest).
const childEnv = "CLIENTTOOLS_PANIC_CHILD"

// TestHandlerPanicIsAToolError: a Serve handler that panics answers its
// call as a tool error quoting the panic's value (the worker does not
// wait out its timeout), OnPanic gets the stack, and the submitter's
// process and its other calls go on. The job's secret is masked in the
// value: the answer goes to the worker's model and events.
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
		case "leaky":
			panic("handler broke (key " + testSecret + ")")
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
		{"leaky", "the client tool leaky failed inside the submitter: handler broke (key xxxxx)"},
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
	if len(stacks) != 3 || !strings.Contains(stacks[0], "panic_test.go") {
		t.Errorf("OnPanic got %d stacks: %v", len(stacks), stacks)
	}
}

// TestCallPanicMasksTheSecret: a panic inside Call (here OnReject's,
// told of a forged answer) goes on to whoever recovers it: the loop makes
// it the call's error, showing its value to the model, the events, the
// journal and the log, masked with its ToolSet's secrets only. A value
// quoting the job's client secret, the key of every MAC of the job, was
// shown as it was. Call masks the secret (every form redact writes it in)
// in the value it panics on again.
func TestCallPanicMasksTheSecret(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, forger := natstest.Connect(t, s), natstest.Connect(t, s)
	sub, err := forger.Subscribe(Subject(DefaultPrefix, "job-mask"), func(m *nats.Msg) { _ = m.Respond([]byte("not an answer")) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := forger.Flush(); err != nil {
		t.Fatal(err)
	}
	c := newCaller(t, worker, "job-mask", testSecret, Options{Timeout: time.Minute, OnReject: func(err error) {
		panic(fmt.Errorf("the reject log broke (key %s): %w", testSecret, err))
	}})
	p := func() (p any) {
		defer func() { p = recover() }()
		_, _ = c.CallText(natstest.Context(t), "ask", json.RawMessage(`{}`))
		return nil
	}()
	if p == nil {
		t.Fatal("CallText did not panic")
	}
	v := fmt.Sprint(p)
	if strings.Contains(v, testSecret) || !strings.Contains(v, "the reject log broke (key xxxxx)") || !strings.Contains(v, "undecodable answer") {
		t.Errorf("the panic's value %q: want it with the secret masked", v)
	}
}
