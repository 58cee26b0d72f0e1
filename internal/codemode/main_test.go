package codemode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if IsChild() { // a Process runner's child: this binary serves it
		os.Exit(ServeChild(os.Stdin, os.Stdout))
	}
	if os.Getenv(removedSelfEnv) == "1" {
		os.Exit(runRemovedSelf())
	}
	// regexp2's clock, which codemode's match bound starts, stops by
	// itself a second after the last match's deadline (30 s on).
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/dlclark/regexp2/v2.runClock"))
}

// call is one Host.Call the code made.
type call struct {
	Seq  int
	Name string
	Args string
}

// fakeHost answers tool calls from funcs, records them, and serves clock
// and random values from funcs of the sequence number.
type fakeHost struct {
	tools  map[string]func(args map[string]any) (Result, error)
	now    func(seq int) int64
	random func(seq int) float64

	mu    sync.Mutex
	calls []call
	nows  []int
	rands []int
}

func (h *fakeHost) Call(ctx context.Context, seq int, name string, args json.RawMessage) (Result, error) {
	h.mu.Lock()
	h.calls = append(h.calls, call{seq, name, string(args)})
	h.mu.Unlock()
	f, ok := h.tools[name]
	if !ok {
		return Result{}, fmt.Errorf("unknown tool %q", name)
	}
	var a map[string]any
	if err := json.Unmarshal(args, &a); err != nil {
		return Result{}, fmt.Errorf("bad args %s: %w", args, err)
	}
	return f(a)
}

func (h *fakeHost) Now(seq int) int64 {
	h.mu.Lock()
	h.nows = append(h.nows, seq)
	h.mu.Unlock()
	if h.now == nil {
		return 1_700_000_000_000 + int64(seq)*1000
	}
	return h.now(seq)
}

func (h *fakeHost) Random(seq int) float64 {
	h.mu.Lock()
	h.rands = append(h.rands, seq)
	h.mu.Unlock()
	if h.random == nil {
		return float64(seq%10) / 10
	}
	return h.random(seq)
}

func (h *fakeHost) recorded() []call {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]call(nil), h.calls...)
}

// echoTools is a catalog and host with a few tools:
//
//	echo          returns {"args": <args>} as JSON text
//	structured    returns structured content (and a text that differs)
//	plain         returns plain text "hello <name>"
//	fails         reports a tool error with the message in args.msg
//	refused       the host refuses the call
func echoTools() (*Catalog, *fakeHost) {
	cat := NewCatalog([]Tool{
		{Name: "echo"}, {Name: "structured"}, {Name: "plain"}, {Name: "fails"}, {Name: "refused"},
		{Name: "github-get_issue"},
	})
	h := &fakeHost{tools: map[string]func(map[string]any) (Result, error){
		"echo": func(a map[string]any) (Result, error) {
			b, _ := json.Marshal(map[string]any{"args": a})
			return Result{Text: string(b)}, nil
		},
		"structured": func(a map[string]any) (Result, error) {
			return Result{Text: "not JSON, ignored", Structured: json.RawMessage(`{"kind":"structured","n":42}`)}, nil
		},
		"plain": func(a map[string]any) (Result, error) {
			return Result{Text: fmt.Sprintf("hello %v", a["name"])}, nil
		},
		"fails": func(a map[string]any) (Result, error) {
			return Result{Text: fmt.Sprint(a["msg"]), IsError: true}, nil
		},
		"refused": func(a map[string]any) (Result, error) {
			return Result{}, fmt.Errorf("denied by policy: refused is not allowed")
		},
		"github-get_issue": func(a map[string]any) (Result, error) {
			return Result{Structured: json.RawMessage(fmt.Sprintf(`{"number":%v,"title":"Issue %v"}`, a["number"], a["number"]))}, nil
		},
	}}
	return cat, h
}
