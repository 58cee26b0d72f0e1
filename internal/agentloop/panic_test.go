package agentloop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/childtest"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/journal"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
	"github.com/jetagent/jetagent/internal/reflect"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// childEnv names the test a child process runs in-process (see childtest).
const childEnv = "AGENTLOOP_PANIC_CHILD"

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// panicky is a ToolSet whose tool boom panics (a nil map, a real runtime
// panic) when called, and whose tool ok answers; it counts the calls.
type panicky struct {
	mu    sync.Mutex
	calls map[string]int
}

func panickySchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
}

func (p *panicky) Tools() []toolcache.Tool {
	var out []toolcache.Tool
	for _, n := range []string{"boom", "ok"} {
		out = append(out, toolcache.Tool{Name: n, Original: n, Server: "s", Description: "Tool " + n + ".", InputSchema: panickySchema(), Parameters: panickySchema()})
	}
	return out
}

func (p *panicky) CallTool(_ context.Context, name string, _ json.RawMessage) (toolcache.Result, error) {
	p.mu.Lock()
	if p.calls == nil {
		p.calls = map[string]int{}
	}
	p.calls[name]++
	p.mu.Unlock()
	if name == "boom" {
		var m map[string]int
		m["x"]++ //nolint:staticcheck // a nil map on purpose: a real runtime panic
	}
	return toolcache.Result{Text: name + " done"}, nil
}

func (p *panicky) count(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[name]
}

func (p *panicky) ListResources(context.Context) ([]toolcache.Resource, error) { return nil, nil }
func (p *panicky) ReadResource(context.Context, string) (string, error)        { return "", nil }

// panickySearch is panicky whose search (search_tools) panics.
type panickySearch struct{ *panicky }

func (panickySearch) SearchToolsContext(context.Context, string, toolcache.SearchOptions) toolcache.SearchResult {
	panic("the index is broken")
}

// nilMapPanic is the panic value of boom.
const nilMapPanic = "assignment to entry in nil map"

// TestCallPanicFailsOnlyThatCall: a panic in a call's goroutine (an MCP
// tool's, a client tool's, a meta tool's, one behind call_tool or inside
// execute_code) does not end the process: that call fails with the panic
// value as its result (no stack in the model's view), the other call of
// the round runs, the job goes on to its answer, and the call is
// published and recorded as a failed call.
func TestCallPanicFailsOnlyThatCall(t *testing.T) {
	t.Parallel()
	if !childtest.InChild(t, childEnv) {
		return
	}
	clientPanics := func(context.Context, string, json.RawMessage) (string, error) {
		panic(fmt.Errorf("client transport broke"))
	}
	clientDecl := []clienttools.Decl{{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	for _, tc := range []struct {
		name  string
		mode  agentloop.Mode
		calls []llm.ToolCall
		tools func(*panicky) agentloop.ToolSet
		in    func(*agentloop.Input)
		// want: the first tool message starts with this; the second is ok's.
		want   string
		record string // the record kind of the panicked call ("" none)
	}{
		{name: "mcp tool", mode: agentloop.ModeFull,
			calls: []llm.ToolCall{call("boom", `{}`), call("ok", `{}`)},
			want:  "Error: the call of boom failed inside the worker: " + nilMapPanic},
		{name: "call_tool", mode: agentloop.ModeSearch,
			calls:  []llm.ToolCall{call("call_tool", `{"name":"boom","arguments":{}}`), call("call_tool", `{"name":"ok","arguments":{}}`)},
			want:   "Error: the call of boom failed inside the worker: " + nilMapPanic,
			record: reflect.KindCallTool},
		{name: "search_tools", mode: agentloop.ModeSearch,
			calls: []llm.ToolCall{call("search_tools", `{"query":"boom"}`), call("call_tool", `{"name":"ok","arguments":{}}`)},
			tools: func(p *panicky) agentloop.ToolSet { return panickySearch{p} },
			want:  "Error: the call of search_tools failed inside the worker: the index is broken"},
		{name: "client tool", mode: agentloop.ModeFull,
			calls: []llm.ToolCall{call("ask", `{}`), call("ok", `{}`)},
			in: func(in *agentloop.Input) {
				in.ClientTools, in.ClientCaller = clientDecl, clientPanics
			},
			want:   "Error: the call of ask failed inside the worker: client transport broke",
			record: reflect.KindClientTool},
		{name: "inside execute_code", mode: agentloop.ModeCode,
			calls: []llm.ToolCall{codeCall(`try { await tools.boom({}) } catch (e) { console.log("caught:", e.message) }`), call("search_tools", `{"query":"ok"}`)},
			want:  "caught: the call of boom failed inside the worker: " + nilMapPanic, record: reflect.KindCode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &panicky{}
			var ts agentloop.ToolSet = p
			if tc.tools != nil {
				ts = tc.tools(p)
			}
			var ev events
			var log lockedBuffer
			cfg := agentloop.Config{Logger: slog.New(slog.NewTextHandler(&log, nil))}
			in := agentloop.Input{JobID: "j", Task: "go", Tools: ts, Mode: tc.mode, Sink: &ev}
			if tc.in != nil {
				tc.in(&in)
			}
			s := llmtest.NewServer(t, toolReply(tc.calls...), textReply("done"))
			res, err := newLoop(t, s, cfg).Run(t.Context(), in)
			if err != nil {
				t.Fatalf("the job failed: %v", err)
			}
			if l := log.String(); !strings.Contains(l, "panic_test.go:") || !strings.Contains(l, "recovered a panic") {
				t.Errorf("the log has no stack of the panic: %s", l)
			}
			if res.Answer != "done" {
				t.Fatalf("answer %q", res.Answer)
			}
			msgs := toolMessages(s.Requests()[1].Messages)
			if len(msgs) != 2 {
				t.Fatalf("tool messages %+v", msgs)
			}
			got := msgs[0].Content
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("the panicked call's result %q, want it to start with %q", got, tc.want)
			}
			if strings.Contains(got, "goroutine") || strings.Contains(got, ".go:") {
				t.Errorf("the model's view holds a stack: %q", got)
			}
			if strings.HasPrefix(msgs[1].Content, "Error") {
				t.Errorf("the other call of the round failed: %q", msgs[1].Content)
			}
			var failed int
			for _, e := range ev.of(agentloop.EventToolResult) {
				if e.Data["error"] == true && strings.Contains(fmt.Sprint(e.Data["output"]), "failed inside the worker") {
					failed++
				}
			}
			if failed != 1 {
				t.Errorf("%d tool.result events of a call that failed inside the worker, want 1", failed)
			}
			if tc.record != "" {
				var rec *reflect.Record
				for i, r := range res.Records {
					if r.Kind == tc.record && rec == nil {
						rec = &res.Records[i]
					}
				}
				if rec == nil || !rec.IsError || rec.Output == nil || !strings.Contains(*rec.Output, "failed inside the worker") {
					t.Errorf("records %+v: want a failed %s record", res.Records, tc.record)
				}
			}
		})
	}
}

// TestCallPanicJournaledAsFailed: a call that panicked is journaled like
// a failed call: an attempt that resumes the round replays its error and
// does not run it again (nor the call beside it).
func TestCallPanicJournaledAsFailed(t *testing.T) {
	t.Parallel()
	if !childtest.InChild(t, childEnv) {
		return
	}
	p := &panicky{}
	store := &dyingStore{}
	round1 := toolReply(call("boom", `{}`), call("ok", `{}`))
	// The first attempt ends after the round's calls ran: the next
	// request is refused.
	s1 := llmtest.NewServer(t, round1, llmtest.Reply{Status: 400})
	in := agentloop.Input{JobID: "j", Task: "go", Tools: p, Mode: agentloop.ModeFull, Journal: newJournal(t, store, nil)}
	if _, err := newLoop(t, s1, agentloop.Config{}).Run(t.Context(), in); err == nil {
		t.Fatal("the first attempt succeeded")
	}
	first := toolMessages(s1.Requests()[1].Messages)

	s2 := llmtest.NewServer(t, textReply("done"))
	in.Journal = newJournal(t, &dyingStore{m: store.snapshot()}, store.snapshot())
	res, err := newLoop(t, s2, agentloop.Config{}).Run(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if n, m := p.count("boom"), p.count("ok"); n != 1 || m != 1 {
		t.Errorf("boom ran %d times, ok %d times; want once each", n, m)
	}
	again := toolMessages(s2.Requests()[0].Messages)
	if len(first) != 2 || len(again) != 2 || first[0].Content != again[0].Content || first[1].Content != again[1].Content {
		t.Fatalf("the resumed attempt's tool messages %+v, the first attempt's %+v", again, first)
	}
	if !strings.HasPrefix(again[0].Content, "Error: the call of boom failed inside the worker: "+nilMapPanic) {
		t.Errorf("replayed %q", again[0].Content)
	}
	if res.Answer != "done" {
		t.Errorf("answer %q", res.Answer)
	}
}

// panickyStore is a journal store whose Put panics for keys with the
// given prefix.
type panickyStore struct {
	dyingStore
	prefix string
}

func (s *panickyStore) Put(ctx context.Context, key string, v []byte) error {
	if strings.HasPrefix(key, s.prefix) {
		panic("store broke")
	}
	return s.dyingStore.Put(ctx, key, v)
}

// TestJournalPanicEndsTheAttempt: a journal store that panics while a
// call is journaled (in the call's goroutine) is an unavailable journal:
// the attempt ends with journal.ErrUnavailable, and the process lives.
// (From outside the journal, a panic of its intent's write, after which
// the call must not run, cannot be told from one of its completion's:
// ending the attempt is right for both; the next one finds the call
// interrupted or not begun.)
func TestJournalPanicEndsTheAttempt(t *testing.T) {
	t.Parallel()
	if !childtest.InChild(t, childEnv) {
		return
	}
	p := &panicky{}
	// Round 1's answer with the intents is stored (key t1); the call's
	// completion (c1.1) panics.
	store := &panickyStore{prefix: "c1.1"}
	s := llmtest.NewServer(t, toolReply(call("ok", `{}`), call("ok", `{"n":2}`)), textReply("done"))
	in := agentloop.Input{JobID: "j", Task: "go", Tools: p, Mode: agentloop.ModeFull, Journal: newJournal(t, store, nil)}
	_, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), in)
	if err == nil || !strings.Contains(err.Error(), "store broke") || !errors.Is(err, journal.ErrUnavailable) {
		t.Fatalf("err = %v, want the journal unavailable with the panic", err)
	}
}

// TestSinkPanicKeepsTheResult: a sink that panics while a call's result
// is published leaves the call's result as it ran.
func TestSinkPanicKeepsTheResult(t *testing.T) {
	t.Parallel()
	if !childtest.InChild(t, childEnv) {
		return
	}
	p := &panicky{}
	sink := agentloop.SinkFunc(func(_ context.Context, e agentloop.Event) {
		if e.Type == agentloop.EventToolResult && e.Data["name"] == "ok" {
			panic("sink broke")
		}
	})
	s := llmtest.NewServer(t, toolReply(call("ok", `{}`)), textReply("done"))
	res, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{JobID: "j", Task: "go", Tools: p, Mode: agentloop.ModeFull, Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	if msgs := toolMessages(res.Messages); len(msgs) != 1 || msgs[0].Content != "ok done" {
		t.Errorf("tool messages %+v", msgs)
	}
}

// TestSinkPanicInsideCodeKeepsTheRecord: a sink that panics while an
// inner call's result is published ends the execution (codemode turns
// the host's panic into an abort), but the inner call ran and is
// journaled: it stays in the reflected transcript's records.
func TestSinkPanicInsideCodeKeepsTheRecord(t *testing.T) {
	t.Parallel()
	p := &panicky{}
	sink := agentloop.SinkFunc(func(_ context.Context, e agentloop.Event) {
		if e.Type == agentloop.EventToolResult && e.Data["from"] == agentloop.ToolExecuteCode {
			panic("sink broke")
		}
	})
	s := llmtest.NewServer(t, toolReply(codeCall(`await tools.ok({})`)), textReply("done"))
	res, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{JobID: "j", Task: "go", Tools: p, Mode: agentloop.ModeCode, Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	if msgs := toolMessages(res.Messages); len(msgs) != 1 || !strings.Contains(msgs[0].Content, "sink broke") {
		t.Errorf("tool messages %+v, want the execution stopped by the panic", msgs)
	}
	if len(res.Records) != 1 || res.Records[0].Name != "ok" || res.Records[0].Output == nil || *res.Records[0].Output != "ok done" {
		t.Errorf("records %+v, want the inner call that ran", res.Records)
	}
	if n := p.count("ok"); n != 1 {
		t.Errorf("ok ran %d times", n)
	}
}

// panicSecret is a credential the ToolSet of TestPanicValueMasked was
// configured with, and masks.
const panicSecret = "sk-live-4f9a8b7c6d5e4f3a2b1c"

// secretPanicky is panicky whose boom panics with a value quoting its
// secret (a request's URL), and which masks the secret (secretMasker,
// as toolcache.View masks its pool's secrets in its calls' errors).
type secretPanicky struct{ *panicky }

func (p secretPanicky) CallTool(ctx context.Context, name string, args json.RawMessage) (toolcache.Result, error) {
	if name == "boom" {
		panic(fmt.Errorf("GET https://api.example.com/v1/items?api_key=%s: the transport broke", panicSecret))
	}
	return p.panicky.CallTool(ctx, name, args)
}

func (secretPanicky) MaskSecrets(s string) string { return strings.ReplaceAll(s, panicSecret, "xxxxx") }

// secretPanickySearch is secretPanicky whose search panics quoting it.
type secretPanickySearch struct{ secretPanicky }

func (secretPanickySearch) SearchToolsContext(context.Context, string, toolcache.SearchOptions) toolcache.SearchResult {
	panic("the index at https://u:" + panicSecret + "@search.example.com is broken")
}

// TestPanicValueMasked: the value of a recovered panic goes to the model
// (the call's result), the events, the records and the log. It bypassed
// the ToolSet's masking of its calls' errors, and quoted the secret the
// ToolSet was configured with: the loop masks it with the ToolSet's
// masker, in a tool's run, a meta tool's dispatch and a call inside
// execute_code.
func TestPanicValueMasked(t *testing.T) {
	t.Parallel()
	if !childtest.InChild(t, childEnv) {
		return
	}
	for _, tc := range []struct {
		name   string
		mode   agentloop.Mode
		search bool
		call   llm.ToolCall
	}{
		{name: "mcp tool", mode: agentloop.ModeFull, call: call("boom", `{}`)},
		{name: "search_tools", mode: agentloop.ModeSearch, search: true, call: call("search_tools", `{"query":"boom"}`)},
		{name: "inside execute_code", mode: agentloop.ModeCode,
			call: codeCall(`try { await tools.boom({}) } catch (e) { console.log("caught:", e.message) }`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts agentloop.ToolSet = secretPanicky{&panicky{}}
			if tc.search {
				ts = secretPanickySearch{secretPanicky{&panicky{}}}
			}
			var ev events
			var log lockedBuffer
			cfg := agentloop.Config{Logger: slog.New(slog.NewTextHandler(&log, nil))}
			s := llmtest.NewServer(t, toolReply(tc.call), textReply("done"))
			res, err := newLoop(t, s, cfg).Run(t.Context(), agentloop.Input{JobID: "j", Task: "go", Tools: ts, Mode: tc.mode, Sink: &ev})
			if err != nil {
				t.Fatalf("the job failed: %v", err)
			}
			msgs := toolMessages(s.Requests()[1].Messages)
			if len(msgs) != 1 || !strings.Contains(msgs[0].Content, "failed inside the worker") || !strings.Contains(msgs[0].Content, "xxxxx") {
				t.Fatalf("tool messages %+v: want the panic's value, masked", msgs)
			}
			for _, r := range s.Requests() {
				if bytes.Contains(r.Raw, []byte(panicSecret)) {
					t.Errorf("request %d to the model holds the secret: %s", r.N, r.Raw)
				}
			}
			ev.mu.Lock()
			shown, err := json.Marshal(map[string]any{"events": ev.all, "records": res.Records, "messages": res.Messages})
			ev.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(shown, []byte(panicSecret)) {
				t.Errorf("the events, records or messages hold the secret: %s", shown)
			}
			if l := log.String(); !strings.Contains(l, "recovered a panic") || strings.Contains(l, panicSecret) {
				t.Errorf("the log has no panic, or holds the secret: %s", l)
			}
		})
	}
}

// TestCodeDoneMarkerPanicKeepsTheResult: the marker that an execute_code
// call completed (codeDone, after the script ran) is only there so that a
// replay does not publish the call's events again; a store that fails to
// write it is ignored. A store that panics writing it made the completed
// script's result "failed inside the worker", and the model, told so,
// could run it again, its inner calls with it (new calls, new keys: not
// replayed). The panic is taken as the failed write it is: the call
// keeps the script's result, the job goes on and the process lives.
func TestCodeDoneMarkerPanicKeepsTheResult(t *testing.T) {
	t.Parallel()
	if !childtest.InChild(t, childEnv) {
		return
	}
	p := &panicky{}
	store := &panickyStore{prefix: "c1.0.end"} // round 1, call 0
	var log lockedBuffer
	cfg := agentloop.Config{Logger: slog.New(slog.NewTextHandler(&log, nil))}
	s := llmtest.NewServer(t, toolReply(codeCall(`const r = await tools.ok({}); console.log("got:", r)`)), textReply("done"))
	in := agentloop.Input{JobID: "j", Task: "go", Tools: p, Mode: agentloop.ModeCode, Journal: newJournal(t, store, nil)}
	res, err := newLoop(t, s, cfg).Run(t.Context(), in)
	if err != nil {
		t.Fatalf("the job failed: %v", err)
	}
	if res.Answer != "done" {
		t.Fatalf("answer %q", res.Answer)
	}
	msgs := toolMessages(s.Requests()[1].Messages)
	if len(msgs) != 1 || !strings.Contains(msgs[0].Content, "got: ok done") || strings.Contains(msgs[0].Content, "Error") {
		t.Fatalf("tool messages %+v: want the script's output", msgs)
	}
	if n := p.count("ok"); n != 1 {
		t.Errorf("ok ran %d times, want 1", n)
	}
	if l := log.String(); !strings.Contains(l, "store broke") {
		t.Errorf("the log does not say the marker's write panicked: %s", l)
	}
}

// minimumTools is panicky whose tools take an n of at least 0.
type minimumTools struct{ *panicky }

func (minimumTools) Tools() []toolcache.Tool {
	schema := json.RawMessage(`{"type":"object","properties":{"n":{"type":"number","minimum":0}}}`)
	var out []toolcache.Tool
	for _, n := range []string{"boom", "ok"} {
		out = append(out, toolcache.Tool{Name: n, Original: n, Server: "s", Description: "Tool " + n + ".", InputSchema: schema, Parameters: schema})
	}
	return out
}

// hugeExponent is a JSON number the schema library panics on when it
// checks it against a minimum: math/big refuses its exponent, and the
// library compares the nil *big.Rat it gets.
const hugeExponent = "1e-1000001"

// TestValidationPanicRefusesOnlyThatCall: the schema library's Validate
// panicked on a number a model wrote (hugeExponent, against a minimum),
// in prepare on the job's goroutine: the whole job failed (the process
// died here, where no worker recovers it). The panic is now that call's
// validation error: the call is refused and not run, the model is told
// why (in the schema retry's note and in the call's result), the valid
// call beside it runs, and the job goes on.
func TestValidationPanicRefusesOnlyThatCall(t *testing.T) {
	t.Parallel()
	if !childtest.InChild(t, childEnv) {
		return
	}
	for _, tc := range []struct {
		name      string
		mode      agentloop.Mode
		bad, good llm.ToolCall
	}{
		{name: "direct", mode: agentloop.ModeFull,
			bad: call("ok", `{"n":`+hugeExponent+`}`), good: call("ok", `{"n":2}`)},
		{name: "call_tool", mode: agentloop.ModeSearch,
			bad:  call("call_tool", `{"name":"ok","arguments":{"n":`+hugeExponent+`}}`),
			good: call("call_tool", `{"name":"ok","arguments":{"n":2}}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := &panicky{}
			var ev events
			round := toolReply(tc.bad, tc.good)
			// The schema retry is answered with the same calls.
			s := llmtest.NewServer(t, round, round, textReply("done"))
			in := agentloop.Input{JobID: "j", Task: "go", Tools: minimumTools{p}, Mode: tc.mode, Sink: &ev}
			res, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), in)
			if err != nil {
				t.Fatalf("the job failed: %v", err)
			}
			if res.Answer != "done" {
				t.Fatalf("answer %q", res.Answer)
			}
			const why = "the schema library failed checking them"
			reqs := s.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d requests, want 3 (the round, its schema retry, the answer)", len(reqs))
			}
			if note := reqs[1].Messages[len(reqs[1].Messages)-1].Content; !strings.Contains(note, why) {
				t.Errorf("the schema retry's note does not say why the call was refused:\n%s", note)
			}
			msgs := toolMessages(reqs[2].Messages)
			if len(msgs) != 2 {
				t.Fatalf("tool messages %+v", msgs)
			}
			if got := msgs[0].Content; !strings.HasPrefix(got, "Error: invalid arguments for tool ok:") || !strings.Contains(got, why) {
				t.Errorf("the refused call's result %q", got)
			}
			if got := msgs[1].Content; got != "ok done" {
				t.Errorf("the valid call's result %q", got)
			}
			if n := p.count("ok"); n != 1 {
				t.Errorf("ok ran %d times, want once (the valid call)", n)
			}
			if n := len(ev.of(agentloop.EventToolValidationFailed)); n != 2 {
				t.Errorf("%d tool.validation_failed events, want 2 (the call and its retry)", n)
			}
		})
	}
}

// clientSecret is TestClientSecretMaskedInPanic's job's client_secret.
const clientSecret = "cs-9f8e7d6c5b4a39281706f5e4d3c2b1a0"

// TestClientSecretMaskedInPanic: a client tool's caller (clienttools'
// Caller, here its OnReject told of a forged answer) panicking with a
// value that quotes the job's client secret: the loop's masking knows
// only the ToolSet's secrets, so the Caller masks its own before the
// loop sees the value. The model, the events, the records and the log
// get it masked; the log still has the stack of the first panic.
func TestClientSecretMaskedInPanic(t *testing.T) {
	t.Parallel()
	if !childtest.InChild(t, childEnv) {
		return
	}
	ns := natstest.Start(t)
	worker, forger := natstest.Connect(t, ns), natstest.Connect(t, ns)
	sub, err := forger.Subscribe(clienttools.Subject(clienttools.DefaultPrefix, "j"), func(m *nats.Msg) { _ = m.Respond([]byte("not an answer")) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := forger.Flush(); err != nil {
		t.Fatal(err)
	}
	caller, err := clienttools.NewCaller(worker, "j", clientSecret, clienttools.Options{Timeout: time.Minute, OnReject: func(err error) {
		panic(fmt.Errorf("the reject log broke (key %s): %w", clientSecret, err))
	}})
	if err != nil {
		t.Fatal(err)
	}
	var ev events
	var log lockedBuffer
	cfg := agentloop.Config{Logger: slog.New(slog.NewTextHandler(&log, nil))}
	s := llmtest.NewServer(t, toolReply(call("ask", `{}`)), textReply("done"))
	in := agentloop.Input{JobID: "j", Task: "go", Tools: &panicky{}, Mode: agentloop.ModeFull, Sink: &ev,
		ClientTools:  []clienttools.Decl{{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		ClientCaller: caller.CallText}
	res, err := newLoop(t, s, cfg).Run(t.Context(), in)
	if err != nil {
		t.Fatalf("the job failed: %v", err)
	}
	msgs := toolMessages(s.Requests()[1].Messages)
	if len(msgs) != 1 || !strings.Contains(msgs[0].Content, "the call of ask failed inside the worker: the reject log broke (key xxxxx)") {
		t.Fatalf("tool messages %+v: want the panic's value, masked", msgs)
	}
	ev.mu.Lock()
	shown, err := json.Marshal(map[string]any{"events": ev.all, "records": res.Records, "messages": res.Messages})
	ev.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(shown, []byte(clientSecret)) {
		t.Errorf("the events, records or messages hold the client secret: %s", shown)
	}
	if l := log.String(); !strings.Contains(l, "recovered a panic") || !strings.Contains(l, "panic_test.go:") || strings.Contains(l, clientSecret) {
		t.Errorf("the log has no panic with its stack, or holds the client secret: %s", l)
	}
}

// listingPanicky is secretPanicky whose listing (Tools) panics with a
// value quoting its secret (a server's URL).
type listingPanicky struct{ secretPanicky }

func (listingPanicky) Tools() []toolcache.Tool {
	panic("listing https://u:" + panicSecret + "@tools.example.com broke")
}

// keyedListingPanicky is listingPanicky naming its catalog's version, as
// toolcache.View does: its catalog is built once, shared by its jobs.
type keyedListingPanicky struct{ listingPanicky }

func (keyedListingPanicky) CatalogKey() (uint64, string) { return 1, "all" }

// TestToolsBuildPanicMasked: a panic while a job's tools are built (the
// ToolSet's listing, for the shared catalog or the job's own) fails the
// job with an error naming the panic. The shared build's error quoted the
// value as it was, the ToolSet's secret with it, to the job's reason and
// events; the job's own build did not recover the panic at all (the
// process died here; in the worker, the job failed with the value
// unmasked). Both now fail the job with the value masked by the ToolSet.
func TestToolsBuildPanicMasked(t *testing.T) {
	t.Parallel()
	if !childtest.InChild(t, childEnv) {
		return
	}
	for _, tc := range []struct {
		name string
		ts   agentloop.ToolSet
	}{
		{"shared catalog", keyedListingPanicky{listingPanicky{secretPanicky{&panicky{}}}}},
		{"the job's own catalog", listingPanicky{secretPanicky{&panicky{}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, textReply("done"))
			_, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{JobID: "j", Task: "go", Tools: tc.ts, Mode: agentloop.ModeFull})
			if err == nil {
				t.Fatal("the job succeeded")
			}
			if got := err.Error(); strings.Contains(got, panicSecret) || !strings.Contains(got, "building the tools panicked: listing https://u:xxxxx@tools.example.com broke") {
				t.Errorf("the job's error %q: want the panic, masked", got)
			}
			if n := len(s.Requests()); n != 0 {
				t.Errorf("%d requests to the model", n)
			}
		})
	}
}
