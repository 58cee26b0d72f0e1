package agentloop_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/codemode"
	"github.com/jetagent/jetagent/internal/journal"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/reflect"
)

func codeCall(code string) llm.ToolCall {
	args, _ := json.Marshal(map[string]string{"code": code})
	return call(agentloop.ToolExecuteCode, string(args))
}

// Code mode end to end: the model writes a script; its calls (awaited,
// in parallel, one with invalid arguments) run on the real MCP server
// with the same checks, publish events marked as coming from code, and
// the stored transcript reflects them as the real calls, in order. The
// tools array is execute_code + search_tools + get_tool_details, the same
// bytes in every request, with the catalog's index.
func TestCodeModeRunsToolsFromCode(t *testing.T) {
	t.Parallel()
	fx := &effects{}
	tools := effectsView(t, fx)
	script := `const a = await tools.read({arg: "x"});
const rs = await Promise.all([tools.write({arg: "p"}), tools.write({arg: "q"})]);
console.log(a, rs.length);
try { await tools.write({}); } catch (e) { console.log("refused:", e.message.includes("arg")); }
return "ok";`
	s := llmtest.NewServer(t,
		toolReply(call(agentloop.ToolSearchTools, `{"query":"write something"}`)),
		toolReply(call(agentloop.ToolGetToolDetails, `{"name":"write"}`)),
		toolReply(codeCall(script)),
		textReply("done"),
	)
	var ev events
	res, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{JobID: "j", Task: "go", Tools: tools, Mode: agentloop.ModeCode, Sink: &ev})
	if err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests", len(reqs))
	}
	var names []string
	for _, tl := range reqs[0].Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "execute_code,search_tools,get_tool_details" {
		t.Fatalf("tools %v", names)
	}
	if !strings.Contains(reqs[0].Tools[0].Description, "write") || !strings.Contains(reqs[0].Tools[0].Description, "read") {
		t.Errorf("execute_code's index lacks the tools: %s", reqs[0].Tools[0].Description)
	}
	// The description tells the model how calls run: one at a time, in
	// order (a replay matches them by sequence), Promise.all included; it
	// said "in parallel", which they never were.
	if d := reqs[0].Tools[0].Description; !strings.Contains(d, "one at a time") || strings.Contains(d, "parallel") {
		t.Errorf("execute_code's description misstates how calls run: %s", d)
	}
	for _, r := range reqs[1:] {
		if string(r.ToolsJSON) != string(reqs[0].ToolsJSON) {
			t.Errorf("request %d has another tools array", r.N)
		}
	}
	msgs := toolMessages(res.Messages)
	if len(msgs) != 3 || !strings.Contains(msgs[0].Content, `"call":"await tools.write(`) {
		t.Fatalf("search_tools answered %q, want the call as code writes it", msgs[0].Content)
	}
	if !strings.Contains(msgs[1].Content, "write(") {
		t.Fatalf("get_tool_details answered %q, want a TypeScript signature", msgs[1].Content)
	}
	out := msgs[2].Content
	for _, want := range []string{"read x done 2", "refused: true", "ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("execute_code output %q lacks %q", out, want)
		}
	}
	if fx.count("read:x") != 1 || fx.count("write:p") != 1 || fx.count("write:q") != 1 {
		t.Errorf("runs %v", fx.runs)
	}
	var fromCode int
	for _, e := range ev.of(agentloop.EventToolResult) {
		if e.Data["from"] == agentloop.ToolExecuteCode {
			fromCode++
			if e.Data["parent_call_id"] == "" {
				t.Errorf("inner result without its parent: %v", e.Data)
			}
		}
	}
	if fromCode != 3 || len(ev.of(agentloop.EventToolValidationFailed)) != 1 {
		t.Errorf("inner results %d, validation failures %d", fromCode, len(ev.of(agentloop.EventToolValidationFailed)))
	}
	// Reflected: the script's three real calls in its place, in order.
	var real []string
	for _, m := range reflect.Rewrite(res.Messages, res.Records) {
		for _, c := range m.ToolCalls {
			real = append(real, c.Function.Name+c.Function.Arguments)
		}
	}
	want := []string{`search_tools{"query":"write something"}`, `get_tool_details{"name":"write"}`, `read{"arg":"x"}`, `write{"arg":"p"}`, `write{"arg":"q"}`}
	if strings.Join(real, " ") != strings.Join(want, " ") {
		t.Errorf("reflected calls %v, want %v", real, want)
	}
}

// Durable code: a worker killed in the middle of a script; the next
// attempt runs the same script again (the journaled answer), its
// completed inner call returns the recorded result without running, the
// clock reads what the first run read, and the call in flight (a write)
// throws as interrupted instead of running again. A script that goes
// another way than the record ends with a clear error.
func TestCodeModeIsDurable(t *testing.T) {
	t.Parallel()
	fx, tools, store, ctx1 := dyingEffects(t, func(arg string) bool { return strings.HasPrefix(arg, "b-") })
	script := `const t = Date.now();
await tools.write({arg: "a"});
try { await tools.write({arg: "b-" + t}); } catch (e) { console.log("second:", e.message); }
return t;`
	s1 := llmtest.NewServer(t, toolReply(codeCall(script)))
	in := agentloop.Input{JobID: "j", Task: "go", Tools: tools, Mode: agentloop.ModeCode, Journal: newJournal(t, store, nil)}
	if _, err := newLoop(t, s1, agentloop.Config{}).Run(ctx1, in); err == nil {
		t.Fatal("the killed attempt succeeded")
	}
	fx.onWrite = nil
	s2 := llmtest.NewServer(t, textReply("done"))
	var ev events
	in.Sink = &ev
	in.Journal = newJournal(t, &dyingStore{m: store.snapshot()}, store.snapshot())
	res, err := newLoop(t, s2, agentloop.Config{}).Run(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(s2.Requests()) != 1 {
		t.Fatalf("model asked %d times, want once (round 1's answer is journaled)", len(s2.Requests()))
	}
	if fx.count("write:a") != 1 {
		t.Errorf("write a ran %d times", fx.count("write:a"))
	}
	var b int
	fx.mu.Lock()
	for k, n := range fx.runs {
		if strings.HasPrefix(k, "write:b-") {
			b += n
		}
	}
	fx.mu.Unlock()
	if b != 1 {
		t.Errorf("write b ran %d times (a replay with another clock would call it with other arguments)", b)
	}
	out := toolMessages(res.Messages)[0].Content
	if !strings.Contains(out, "second:") || !strings.Contains(out, "was interrupted") {
		t.Errorf("the script did not see the interruption: %q", out)
	}
	if len(ev.of(agentloop.EventToolInterrupted)) != 1 {
		t.Errorf("tool.interrupted events: %d", len(ev.of(agentloop.EventToolInterrupted)))
	}

	// Another script at the same place diverges from the record.
	s3 := llmtest.NewServer(t, textReply("done"))
	in.Journal = newJournal(t, &dyingStore{m: store.snapshot()}, divergent(t, store.snapshot()))
	in.Sink = nil
	res, err = newLoop(t, s3, agentloop.Config{}).Run(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	if out := toolMessages(res.Messages)[0].Content; !strings.Contains(out, "diverged") {
		t.Errorf("a diverging replay answered %q", out)
	}
}

// divergent rewrites the journaled first inner call's arguments.
func divergent(t *testing.T, m map[string][]byte) map[string][]byte {
	t.Helper()
	v, ok := m["c1.0.0"]
	if !ok {
		t.Fatalf("no inner call journaled: %v", m)
	}
	m["c1.0.0"] = []byte(strings.Replace(string(v), `"arg":"a"`, `"arg":"other"`, 1))
	return m
}

// Escape attempts and runaway scripts end their execution with a clear
// error for the model; the job, the worker and other jobs go on.
//
// Not parallel: it runs before the package's parallel tests start, so its
// huge allocation cannot trip their scripts' memory watchdog.
func TestCodeModeRefusesEscapes(t *testing.T) {
	tools := effectsView(t, &effects{})
	for _, tc := range []struct {
		name, code, want string
		// wall is the case's wall-time limit (0: 2 s). A case that must
		// end at another limit gets a minute, so that a slow machine
		// cannot reach the wall time first.
		wall time.Duration
	}{
		{"require", `const fs = require("fs"); return fs.readFileSync("/etc/passwd")`, "require", 0},
		{"import", `const m = await import("fs"); return m`, "import", 0},
		{"fetch", `return await fetch("http://example.com")`, "fetch", 0},
		{"process", `return process.env`, "process", 0},
		{"timers", `setTimeout(() => {}, 10)`, "setTimeout", 0},
		{"infinite loop", `while (true) {}`, "wall time", 0},
		{"huge output", `for (let i = 0; i < 100000; i++) console.log("x".repeat(100))`, "truncated", 0},
		{"deep recursion", `const f = n => f(n + 1) + 1; return f(0)`, "stack", 0},
		{"huge allocation", `let a = []; for (;;) a.push(new Array(1e6).fill(1))`, "", 0},
		{"global object", `return this.constructor.constructor("return process")()`, "Function constructor is not available", 0},
		{"unawaited call flood", `for (;;) tools.read({arg: "x"})`, "limit of 200 tool calls", time.Minute},
		{"never settles", `await new Promise(() => {})`, "never settles", 0},
		{"arguments not an object", `await tools.read({toJSON: () => "x"})`, "serialised to a string", 0},
		// The refusal said "search_tools finds them" of a tools.search_tools
		// the code cannot call.
		{"a meta tool from code", `await tools.search_tools({query: "x"})`, "tools.search_tools is not a tool of this job: search_tools is a tool of your tools list, not of the code: call it directly", 0},
	} {
		// One at a time: codemode's memory watchdog reads the process's
		// heap, so a neighbour's allocation could stop the loop case first.
		t.Run(tc.name, func(t *testing.T) {
			s := llmtest.NewServer(t, toolReply(codeCall(tc.code)), textReply("ok"))
			wall := tc.wall
			if wall == 0 {
				wall = 2 * time.Second
			}
			l := newLoop(t, s, agentloop.Config{CodeLimits: codemode.Limits{WallTime: wall, MaxMemory: 64 << 20}})
			res, err := l.Run(t.Context(), agentloop.Input{Task: "go", Tools: tools, Mode: agentloop.ModeCode})
			if err != nil || res.Answer != "ok" {
				t.Fatalf("the job did not go on: %v %q", err, res.Answer)
			}
			out := toolMessages(res.Messages)[0].Content
			if tc.name != "huge output" && !strings.HasPrefix(out, "Error: ") {
				t.Errorf("answered %.300q, want an error", out)
			}
			if !strings.Contains(strings.ToLower(out), strings.ToLower(tc.want)) {
				t.Errorf("answered %.300q, want it to mention %q", out, tc.want)
			}
		})
	}
}

// From code, a client tool is answered by the submitter (with the call's
// idempotency key in its context) and recorded as a code call; a tool the
// job's view leaves out does not exist on `tools`.
func TestCodeModeClientToolsAndPolicy(t *testing.T) {
	t.Parallel()
	fx := &effects{}
	view := inProcessView(t, []string{"write"}, map[string]*server.MCPServer{"fx": fx.server()}) // the job denies write
	script := `const who = await tools.ask_user({question: "name?"});
let denied;
try { await tools.write({arg: "x"}); } catch (e) { denied = e.message; }
console.log(who, "|", denied);`
	s := llmtest.NewServer(t, toolReply(codeCall(script)), textReply("ok"))
	var keys []string
	var mu sync.Mutex
	res, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{
		JobID: "j", Task: "go", Tools: view, Mode: agentloop.ModeCode, Journal: newJournal(t, &dyingStore{}, nil),
		ClientTools: []clienttools.Decl{{Name: "ask_user", Description: "Ask the user.", InputSchema: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string"}},"required":["question"]}`)}},
		ClientCaller: func(ctx context.Context, name string, args json.RawMessage) (string, error) {
			mu.Lock()
			keys = append(keys, journal.KeyFromContext(ctx))
			mu.Unlock()
			return "Ada", nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := toolMessages(res.Messages)[0].Content
	if !strings.HasPrefix(out, "Ada |") || !strings.Contains(out, "tools.write is not a tool of this job") {
		t.Errorf("script printed %q: want the submitter's answer and write refused", out)
	}
	if fx.count("write:x") != 0 {
		t.Error("a denied tool ran from code")
	}
	if len(keys) != 1 || !strings.HasPrefix(keys[0], "j/") {
		t.Errorf("client tool idempotency keys %v", keys)
	}
	if len(res.Records) != 1 || res.Records[0].Kind != reflect.KindCode || res.Records[0].Name != "ask_user" {
		t.Errorf("records %+v", res.Records)
	}
}
