package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dop251/goja"
)

func TestRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		code      string
		want      string // Output.Text
		wantErr   string // substring of Output.Err; "" for none
		wantCalls []call
	}{
		{name: "return value", code: `return 1 + 2`, want: "3"},
		{name: "last expression is the value", code: "const x = 20;\nx * 2 + 2", want: "42"},
		{name: "last expression after empty statements", code: "[1, 2];;", want: "[1,2]"},
		{name: "no value", code: `const x = 1;`, want: ""},
		{name: "undefined value is not printed", code: `console.log("a"); undefined`, want: "a"},
		{name: "string value is printed raw", code: `"hello\nworld"`, want: "hello\nworld"},
		{name: "object value as JSON", code: `({a: [1, "x"], b: null})`, want: `{"a":[1,"x"],"b":null}`},
		{name: "console then value", code: "console.log('one', 2, {three: 3});\nconsole.log([4]);\nreturn 'done'", want: "one 2 {\"three\":3}\n[4]\ndone"},
		{name: "console levels", code: `console.info("i"); console.debug("d"); console.warn("w"); console.error("e")`, want: "i\nd\n[warn] w\n[error] e"},
		{name: "console formats values", code: `console.log(undefined, null, true, 1.5, -0, "s", ["s"], function f() {}, Symbol("y"), new Map([[1, 2]]), new Set(["a"]), new Error("bad"))`,
			want: `undefined null true 1.5 0 s ["s"] [Function: f] Symbol(y) Map(1) [[1,2]] Set(1) ["a"] Error: bad`},
		{name: "cyclic value", code: `const o = {}; o.o = o; console.log(o)`, want: "[unprintable object: TypeError: Converting circular structure to JSON]"},
		{name: "await a tool", code: `const r = await tools.echo({level: "error"}); return r.args.level`,
			want: "error", wantCalls: []call{{0, "echo", `{"level":"error"}`}}},
		{name: "no argument is an empty object", code: `(await tools.echo()).args`, want: "{}", wantCalls: []call{{0, "echo", `{}`}}},
		{name: "undefined fields are dropped", code: `(await tools.echo({a: undefined, b: 1})).args`, want: `{"b":1}`, wantCalls: []call{{0, "echo", `{"b":1}`}}},
		{name: "identifier of a name that is not one", code: `(await tools.github_get_issue({number: 7})).title`,
			want: "Issue 7", wantCalls: []call{{0, "github-get_issue", `{"number":7}`}}},
		// search_tools and get_tool_details give the name: it works as a key too.
		{name: "a tool's name that is not an identifier", code: `(await tools["github-get_issue"]({number: 8})).title`,
			want: "Issue 8", wantCalls: []call{{0, "github-get_issue", `{"number":8}`}}},
		{name: "a tool's name is no own key", code: `["github-get_issue" in tools, Object.keys(tools).includes("github-get_issue")]`, want: "[false,false]"},
		{name: "structured content wins", code: `await tools.structured({})`, want: `{"kind":"structured","n":42}`, wantCalls: []call{{0, "structured", `{}`}}},
		{name: "JSON text is parsed", code: `typeof (await tools.echo({}))`, want: "object", wantCalls: []call{{0, "echo", `{}`}}},
		{name: "plain text stays text", code: `const t = await tools.plain({name: "bob"}); typeof t + ": " + t`, want: "string: hello bob", wantCalls: []call{{0, "plain", `{"name":"bob"}`}}},
		{name: "sequential awaits", code: "const a = await tools.echo({n: 1});\nconst b = await tools.echo({n: a.args.n + 1});\nreturn b.args.n",
			want: "2", wantCalls: []call{{0, "echo", `{"n":1}`}, {1, "echo", `{"n":2}`}}},
		{name: "Promise.all runs the calls in order", code: `const rs = await Promise.all([1, 2, 3].map(n => tools.echo({n}))); rs.map(r => r.args.n)`,
			want: "[1,2,3]", wantCalls: []call{{0, "echo", `{"n":1}`}, {1, "echo", `{"n":2}`}, {2, "echo", `{"n":3}`}}},
		{name: "async function called last is awaited", code: "async function main() {\n  const r = await tools.plain({name: 'x'});\n  return r.toUpperCase();\n}\nmain()",
			want: "HELLO X", wantCalls: []call{{0, "plain", `{"name":"x"}`}}},
		{name: "tool error caught", code: "try {\n  await tools.fails({msg: 'no such issue'});\n} catch (e) {\n  return [e instanceof Error, e.name, e.message, e.tool].join('|');\n}",
			want: "true|ToolError|no such issue|fails", wantCalls: []call{{0, "fails", `{"msg":"no such issue"}`}}},
		{name: "tool error uncaught", code: "const x = 1;\nawait tools.fails({msg: 'rate limited'});",
			wantErr: "Uncaught ToolError: rate limited (at line 2:", wantCalls: []call{{0, "fails", `{"msg":"rate limited"}`}}},
		{name: "refusal is a catchable Error", code: `try { await tools.refused({}) } catch (e) { return e.name + ": " + e.message }`,
			want: "Error: denied by policy: refused is not allowed", wantCalls: []call{{0, "refused", `{}`}}},
		{name: "refusal uncaught", code: `await tools.refused({})`, wantErr: "Uncaught Error: denied by policy: refused is not allowed", wantCalls: []call{{0, "refused", `{}`}}},
		{name: "a tool error rejects Promise.all", code: `await Promise.all([tools.echo({}), tools.fails({msg: "second failed"})])`,
			wantErr: "Uncaught ToolError: second failed", wantCalls: []call{{0, "echo", `{}`}, {1, "fails", `{"msg":"second failed"}`}}},
		{name: "argument must be an object", code: `await tools.echo("level=error")`, wantErr: "Uncaught TypeError: tools.echo takes one argument, an object of named parameters, not string"},
		{name: "array argument", code: `await tools.echo([1])`, wantErr: "not an array"},
		{name: "unknown tool", code: `await tools.nope({})`, wantErr: "Uncaught TypeError"},
		// The message was the whole name, then what is wrong: cut for the
		// model (16 KiB), it said nothing but the name.
		{name: "an unknown name of a megabyte is quoted by its start", code: `await tools["x".repeat(1 << 20)]({})`,
			wantErr: "Uncaught TypeError: tools." + strings.Repeat("x", 128) + "... (1048576 characters) is not a tool of this job"},
		{name: "tools is frozen", code: `tools.echo = 1; Object.isFrozen(tools) + " " + typeof tools.echo`, want: "true function"},
		{name: "uncaught throw with location", code: "const a = 1;\n  throw new RangeError('out of range');", wantErr: "Uncaught RangeError: out of range (at line 2:"},
		{name: "uncaught non-Error", code: `throw {code: 7}`, wantErr: `Uncaught {"code":7}`},
		{name: "uncaught string", code: `throw "plain"`, wantErr: `Uncaught "plain"`},
		{name: "type error", code: "const o = undefined;\no.x", wantErr: "Uncaught TypeError: Cannot read property 'x' of undefined (at line 2:"},
		{name: "syntax error", code: "const a = 1;\nconst b = ;", wantErr: "SyntaxError: Line 2:11 Unexpected token ;"},
		{name: "syntax error on line 1 has the code's column", code: "const = 1", wantErr: "SyntaxError: Line 1:7 "},
		{name: "closing the wrapper", code: "}); (async () => {", wantErr: "SyntaxError"},
		{name: "console output kept on error", code: `console.log("before"); throw new Error("after")`, want: "before", wantErr: "Uncaught Error: after"},
		{name: "never settles", code: `await new Promise(() => {})`, wantErr: "never settles"},
		{name: "unhandled rejection is reported", code: `tools.fails({msg: "lost"}); return "end"`,
			want: "[error] unhandled rejection: ToolError: lost (at line 1:", wantCalls: []call{{0, "fails", `{"msg":"lost"}`}}},
		{name: "handled later is not reported", code: `const p = tools.fails({msg: "x"}); await null; try { await p } catch (e) { return "caught" }`,
			want: "caught", wantCalls: []call{{0, "fails", `{"msg":"x"}`}}},
		{name: "use strict", code: "'use strict';\nundeclared = 1", wantErr: "ReferenceError: undeclared is not defined"},
		{name: "unicode before a rewrite", code: `const s = "héllo wörld ✓"; ({...{s}}).s`, want: "héllo wörld ✓"},
		{name: "object spread and rest", code: `const {a, ...rest} = {...{a: 1, b: 2}, c: 3}; [a, rest]`, want: `[1,{"b":2,"c":3}]`},
		{name: "for-in", code: `const ks = []; for (const k in {x: 1, y: 2}) ks.push(k); ks`, want: `["x","y"]`},
		{name: "generators and classes", code: "function* g() { yield 1; yield 2 }\nclass A { #p = 3; get p() { return this.#p } }\n[...g(), new A().p]", want: "[1,2,3]"},
		{name: "regexp replace with patterns", code: `"2020-01".replace(/(?<y>\d+)-(?<m>\d+)/, "$<m>/$<y>") + " " + "abc".replace(/(b)/g, "[$1$&$` + "`" + `$']") + " " + "aXb".replaceAll("X", "$$")`,
			want: "01/2020 a[bbac]c a$b"},
		{name: "JSON array replacer keeps its order", code: `JSON.stringify({b: 1, a: {c: 2, b: 3}}, ["a", "b"])`, want: `{"a":{"b":3},"b":1}`},
		{name: "JSON with indentation", code: `JSON.stringify({a: [1]}, null, 1)`, want: "{\n \"a\": [\n  1\n ]\n}"},
		{name: "JSON replacer function", code: `JSON.stringify({a: 1, b: 2}, (k, v) => k === "b" ? undefined : v)`, want: `{"a":1}`},
		{name: "array helpers", code: `[[1, [2]], 3].flat(Infinity).concat([4]).join("-") + " " + String([1, [2, 3]]) + " " + Array.from({length: 3}, (_, i) => i * 2)`, want: "1-2-3-4 1,2,3 0,2,4"},
		{name: "string helpers", code: `"ab".repeat(2) + "x".padStart(3, "-") + "a,b".split(",").length + Math.max(...[1, 5, 3])`, want: "abab--x25"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cat, h := echoTools()
			out := cat.Run(context.Background(), tt.code, h, Limits{})
			if tt.wantErr == "" && out.Err != nil {
				t.Fatalf("Err = %v, want none (text %q)", out.Err, out.Text)
			}
			if tt.wantErr != "" && (out.Err == nil || !strings.Contains(out.Err.Error(), tt.wantErr)) {
				t.Fatalf("Err = %v, want it to contain %q", out.Err, tt.wantErr)
			}
			if strings.HasSuffix(tt.want, ":") || strings.HasSuffix(tt.want, "(at line 1:") {
				if !strings.HasPrefix(out.Text, tt.want) {
					t.Errorf("Text = %q, want prefix %q", out.Text, tt.want)
				}
			} else if out.Text != tt.want {
				t.Errorf("Text = %q, want %q", out.Text, tt.want)
			}
			got := h.recorded()
			if len(got) != len(tt.wantCalls) || (len(got) > 0 && !reflect.DeepEqual(got, tt.wantCalls)) {
				t.Errorf("calls = %+v, want %+v", got, tt.wantCalls)
			}
			if out.Calls != len(tt.wantCalls) {
				t.Errorf("Calls = %d, want %d", out.Calls, len(tt.wantCalls))
			}
		})
	}
}

// The emulated $-substitution (used when the native one could grow past
// the size limit) gives what the native one gives.
func TestReplaceSubstitutionEmulated(t *testing.T) {
	t.Parallel()
	code := "const s = 'a-b_c'.repeat(30);\n" +
		"const pats = ['[$1|$2|$&|$`|$\\'|$$|$0|$9|$<x>]', '<$<w>:$10>', 'plain'];\n" +
		"for (const p of pats) {\n" +
		"  console.log(s.replace(/(\\w)-(?<w>\\w)/g, p));\n" +
		"  console.log(s.replace(/(\\w)_(\\w)/g, p));\n" +
		"}"
	cat, h := echoTools()
	native := cat.Run(context.Background(), code, h, Limits{})
	// With a tiny memory limit the size bound of these replacements is
	// over MAX_STR, so the prelude applies them through its JavaScript
	// substitution.
	emulated := cat.Run(context.Background(), code, h, Limits{guardMemory: 4096, MaxOutput: 1 << 20})
	if native.Err != nil || emulated.Err != nil {
		t.Fatalf("errors: native %v, emulated %v", native.Err, emulated.Err)
	}
	if native.Text != emulated.Text {
		t.Errorf("emulated substitution differs:\nnative   %q\nemulated %q", native.Text, emulated.Text)
	}
	if !strings.Contains(native.Text, "[a|b|a-b|") {
		t.Errorf("unexpected native result %q", native.Text)
	}
}

func TestLimits(t *testing.T) {
	t.Parallel()
	tests := []limitCase{
		{name: "infinite loop", code: "let i = 0;\nwhile (true) { i++ }", lim: Limits{WallTime: 200 * time.Millisecond}, limit: "wall time", wantErr: "wall time limit of 200ms"},
		{name: "infinite microtask loop", code: "for (;;) await null;", lim: Limits{WallTime: 200 * time.Millisecond}, limit: "wall time"},
		{name: "loop in a promise callback", code: "Promise.resolve().then(() => { for (;;) {} });\nreturn 1", lim: Limits{WallTime: 200 * time.Millisecond}, limit: "wall time"},
		{name: "catch does not stop a timeout", code: "try { for (;;) {} } catch (e) { console.log('caught') }", lim: Limits{WallTime: 200 * time.Millisecond}, limit: "wall time"},
		{name: "tool calls", code: "for (let i = 0; i < 10; i++) {\n  try { await tools.echo({i}) } catch (e) { console.log('caught', e.message) }\n}", lim: Limits{MaxCalls: 3},
			limit: "tool calls", wantErr: "the limit of 3 tool calls per execution was reached"},
		{name: "tool calls in Promise.all", code: "await Promise.all([1, 2, 3, 4].map(i => tools.echo({i})))", lim: Limits{MaxCalls: 3}, limit: "tool calls"},
		{name: "deep recursion", code: "function f(n) { return f(n + 1) + 1 }\nf(0)", lim: Limits{MaxStackDepth: 100}, limit: "call stack", wantErr: "exceeded 100 frames"},
		{name: "deep recursion through a built-in", code: "function f() { [1].map(f) }\nf()", lim: Limits{MaxStackDepth: 200}, limit: "call stack"},
		{name: "recursion caught", code: "function f() { try { return f() } catch (e) { return 0 } }\nf()", lim: Limits{MaxStackDepth: 100}, limit: "call stack"},
		{name: "code size", code: strings.Repeat("1;\n", 100), lim: Limits{MaxCode: 100}, limit: "code size", wantErr: "the code is 300 bytes, over the limit of 100 bytes"},
		// The code reaches the limit once it printed (reachWallTime): a
		// 100 ms timer raced the runtime's set-up on a busy machine.
		{name: "output survives a limit", code: "console.log('working');\nreachWallTime();\nwhile (true) {}", lim: wallOnCall(Limits{WallTime: 100 * time.Millisecond}), limit: "wall time", wantText: "working"},
	}
	for _, tt := range tests {
		if tt.lim.MaxMemory != 0 {
			continue // TestMemoryLimit
		}
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkLimit(t, tt)
		})
	}
}

// wallOnCall is lim with its wall time reached when the code calls
// reachWallTime(), not after WallTime: the test decides what ran before.
func wallOnCall(lim Limits) Limits {
	wall := make(chan time.Time)
	var once sync.Once
	lim.wall = wall
	lim.hook = func(vm *goja.Runtime) {
		_ = vm.Set("reachWallTime", func() { once.Do(func() { close(wall) }) })
	}
	return lim
}

// TestMemoryLimit is TestLimits' memory case, not in parallel with any
// test: the watchdog reads the process's heap, so this case's growth would
// be charged to other executions running beside it, and theirs to it.
func TestMemoryLimit(t *testing.T) {
	checkLimit(t, limitCase{name: "memory", code: "const keep = [], base = 'x'.repeat(1 << 20);\nfor (let i = 0; ; i++) keep.push({i, s: base + i});", lim: Limits{MaxMemory: 32 << 20},
		limit: "memory", wantErr: "over the limit of 32 MiB"})
}

// limitCase is one case of TestLimits.
type limitCase struct {
	name     string
	code     string
	lim      Limits
	limit    string // LimitError.Limit
	wantErr  string
	wantText string // prefix of Output.Text
}

func checkLimit(t *testing.T, tt limitCase) {
	t.Helper()
	cat, h := echoTools()
	start := time.Now()
	out := cat.Run(context.Background(), tt.code, h, tt.lim)
	var le *LimitError
	if !errors.As(out.Err, &le) || le.Limit != tt.limit || !errors.Is(out.Err, ErrLimit) {
		t.Fatalf("Err = %v (%T), want a %q LimitError", out.Err, out.Err, tt.limit)
	}
	if !strings.Contains(out.Err.Error(), tt.wantErr) {
		t.Errorf("Err = %q, want it to contain %q", out.Err, tt.wantErr)
	}
	if strings.Contains(out.Text, "caught") {
		t.Errorf("the code caught the limit: %q", out.Text)
	}
	if !strings.HasPrefix(out.Text, tt.wantText) {
		t.Errorf("Text = %q, want prefix %q", out.Text, tt.wantText)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
	if tt.limit == "tool calls" && out.Calls != tt.lim.MaxCalls {
		t.Errorf("Calls = %d, want %d", out.Calls, tt.lim.MaxCalls)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	cat, h := echoTools()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	out := cat.Run(ctx, "while (true) {}", h, Limits{})
	if !errors.Is(out.Err, context.Canceled) || !strings.Contains(out.Err.Error(), "execution cancelled") {
		t.Fatalf("Err = %v, want a cancellation", out.Err)
	}
}

// A Host.Call in progress sees its context done when the execution stops.
func TestCallContextCancelledOnStop(t *testing.T) {
	t.Parallel()
	cat := NewCatalog([]Tool{{Name: "slow"}})
	// The host reaches the limit once the call runs (Limits.wall): a timer
	// raced the runtime's set-up, which took 100 ms under -race on a busy
	// machine, and then came before the call ("a loop that does not end?").
	wall := make(chan time.Time)
	h := ctxHost{started: func() { close(wall) }}
	out := cat.Run(context.Background(), `await tools.slow({})`, h, Limits{WallTime: time.Second, wall: wall})
	var le *LimitError
	if !errors.As(out.Err, &le) || le.Limit != "wall time" {
		t.Fatalf("Err = %v, want the wall time limit", out.Err)
	}
	// The time went to the tool: no hint of a loop that does not end.
	if msg := out.Err.Error(); !strings.Contains(msg, `while tool "slow" was running`) || strings.Contains(msg, "loop") {
		t.Errorf("Err = %q, want it to name the tool that was running", msg)
	}
}

// ctxHost's calls last until their context is done; started, when set, is
// called as the (single) call starts.
type ctxHost struct{ started func() }

func (h ctxHost) Call(ctx context.Context, seq int, name string, args json.RawMessage) (Result, error) {
	if h.started != nil {
		h.started()
	}
	<-ctx.Done()
	return Result{}, ctx.Err()
}
func (ctxHost) Now(int) int64      { return 0 }
func (ctxHost) Random(int) float64 { return 0 }

func TestOutputLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		code     string
		max      int
		contains []string
	}{
		{name: "console output cut", code: `for (let i = 0; i < 1000; i++) console.log("line", i)`, max: 300,
			contains: []string{"line 0\nline 1\n", "[output truncated: "}},
		{name: "value cut", code: `"v".repeat(5000)`, max: 300, contains: []string{"vvv", "[output truncated: the final value is 5000 bytes"}},
		{name: "both cut, value keeps its share", code: `for (let i = 0; i < 1000; i++) console.log("line", i); "w".repeat(5000)`, max: 400,
			contains: []string{"line 0", "console lines not shown", "www", "the final value is 5000 bytes"}},
		{name: "short logs leave the rest to the value", code: `console.log("hi"); "w".repeat(5000)`, max: 400,
			contains: []string{"hi\nwww", "the final value is 5000 bytes"}},
		{name: "multibyte text cut on a rune boundary", code: `"é".repeat(1000)`, max: 201, contains: []string{"éé"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cat, h := echoTools()
			out := cat.Run(context.Background(), tt.code, h, Limits{MaxOutput: tt.max})
			if out.Err != nil {
				t.Fatal(out.Err)
			}
			if len(out.Text) > tt.max {
				t.Errorf("Text is %d bytes, over %d: %q", len(out.Text), tt.max, out.Text)
			}
			if !utf8Valid(out.Text) {
				t.Errorf("Text is not valid UTF-8: %q", out.Text)
			}
			for _, c := range tt.contains {
				if !strings.Contains(out.Text, c) {
					t.Errorf("Text = %q, want it to contain %q", out.Text, c)
				}
			}
		})
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// Date and Math.random come from the Host, so a replay with the same
// values takes the same path and prints the same output.
func TestClockAndRandomFromHost(t *testing.T) {
	t.Parallel()
	code := "const t0 = Date.now();\n" +
		"const d = new Date();\n" +
		"const r = [Math.random(), Math.random()];\n" +
		"const s = Date();\n" +
		"const pick = r[0] < 0.5 ? 'low' : 'high';\n" +
		"await tools.echo({pick});\n" +
		"[t0, d.getTime(), d.toISOString(), r, typeof s, pick, new Date(0).toISOString(), Date.UTC(2020, 0)]"
	run := func(nowBase int64, rnd float64) (Output, *fakeHost) {
		cat, h := echoTools()
		h.now = func(seq int) int64 { return nowBase + int64(seq)*1000 }
		h.random = func(seq int) float64 { return rnd + float64(seq)/100 }
		return cat.Run(context.Background(), code, h, Limits{}), h
	}
	a, ha := run(1_700_000_000_000, 0.25)
	b, hb := run(1_700_000_000_000, 0.25)
	if a.Err != nil || b.Err != nil {
		t.Fatal(a.Err, b.Err)
	}
	want := `[1700000000000,1700000001000,"2023-11-14T22:13:21.000Z",[0.25,0.26],"string","low","1970-01-01T00:00:00.000Z",1577836800000]`
	if a.Text != want {
		t.Errorf("Text = %s\nwant   %s", a.Text, want)
	}
	if a.Text != b.Text || !reflect.DeepEqual(ha.recorded(), hb.recorded()) {
		t.Errorf("replay differs: %q vs %q", a.Text, b.Text)
	}
	if !reflect.DeepEqual(ha.nows, []int{0, 1, 2}) || !reflect.DeepEqual(ha.rands, []int{0, 1}) {
		t.Errorf("clock reads %v, random reads %v", ha.nows, ha.rands)
	}
	// Other values take the other path.
	c, hc := run(1_800_000_000_000, 0.75)
	if c.Err != nil || !strings.Contains(c.Text, `"high"`) || hc.recorded()[0].Args != `{"pick":"high"}` {
		t.Errorf("Text = %q, calls %v", c.Text, hc.recorded())
	}
}

func TestRandomOutOfRange(t *testing.T) {
	t.Parallel()
	cat, h := echoTools()
	h.random = func(int) float64 { return 7 }
	out := cat.Run(context.Background(), `Math.random()`, h, Limits{})
	if out.Err != nil || out.Text != "0" {
		t.Errorf("Text = %q, Err = %v", out.Text, out.Err)
	}
}

// Every Run has a fresh runtime.
func TestRunsShareNothing(t *testing.T) {
	t.Parallel()
	cat, h := echoTools()
	first := cat.Run(context.Background(), "globalThis.leak = 1; Array.prototype.extra = 2; Object.prototype.polluted = 3; JSON.stringify = () => 'x'; 'ok'", h, Limits{})
	second := cat.Run(context.Background(), "[typeof leak, typeof [].extra, typeof ({}).polluted, JSON.stringify({a: 1})]", h, Limits{})
	if first.Err != nil || second.Err != nil {
		t.Fatal(first.Err, second.Err)
	}
	if second.Text != `["undefined","undefined","undefined","{\"a\":1}"]` {
		t.Errorf("second run saw the first: %s", second.Text)
	}
}

func TestConcurrentRuns(t *testing.T) {
	t.Parallel()
	cat, _ := echoTools()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, h := echoTools()
			code := fmt.Sprintf("let s = 0;\nfor (let k = 0; k < 3; k++) s += (await tools.echo({n: %d + k})).args.n;\nconsole.log('run', %d);\ns", i, i)
			lim := Limits{}
			if i%4 == 0 {
				code = "while (true) {}"
				lim.WallTime = 100 * time.Millisecond
			}
			out := cat.Run(context.Background(), code, h, lim)
			switch {
			case i%4 == 0:
				if !errors.Is(out.Err, ErrLimit) {
					errs <- fmt.Errorf("run %d: Err = %w", i, out.Err)
				}
			case out.Err != nil:
				errs <- fmt.Errorf("run %d: %w", i, out.Err)
			case out.Text != fmt.Sprintf("run %d\n%d", i, 3*i+3):
				errs <- fmt.Errorf("run %d: Text = %q", i, out.Text)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

var errJournal = errors.New("journal: replay diverged at call 0: recorded echo, got refused")

func TestAbortEndsTheExecution(t *testing.T) {
	t.Parallel()
	cat, h := echoTools()
	h.tools["refused"] = func(map[string]any) (Result, error) { return Result{}, Abort(errJournal) }
	out := cat.Run(context.Background(), "try { await tools.refused({}) } catch (e) { console.log('caught') }\nawait tools.echo({})", h, Limits{})
	if !errors.Is(out.Err, errJournal) {
		t.Fatalf("Err = %v, want the abort cause", out.Err)
	}
	if strings.Contains(out.Text, "caught") || out.Calls != 1 {
		t.Errorf("the code went on: Text %q, Calls %d", out.Text, out.Calls)
	}
}

func TestHostPanicIsAnAbort(t *testing.T) {
	t.Parallel()
	cat, h := echoTools()
	h.tools["echo"] = func(map[string]any) (Result, error) { panic("boom") }
	out := cat.Run(context.Background(), "try { await tools.echo({}) } catch (e) { console.log('caught') }", h, Limits{})
	if out.Err == nil || !strings.Contains(out.Err.Error(), "failed inside the host: boom") || strings.Contains(out.Text, "caught") {
		t.Fatalf("Err = %v, Text %q", out.Err, out.Text)
	}
}

func TestNilHost(t *testing.T) {
	t.Parallel()
	cat, _ := echoTools()
	out := cat.Run(context.Background(), "try { await tools.echo({}) } catch (e) { console.log(e.message) }\ntypeof Date.now() + typeof Math.random()", nil, Limits{})
	if out.Err != nil || out.Text != "no tools can be called here\nnumbernumber" {
		t.Errorf("Text = %q, Err = %v", out.Text, out.Err)
	}
}

// explainHost is a fakeHost that knows why some names are not tools.
type explainHost struct {
	*fakeHost
	why map[string]string
}

func (h explainHost) Explain(name string) string { return h.why[name] }

// A name that is not a tool of the execution was refused with "not a tool
// of this job" even when the Host knew why (its server is down): the
// Host's reason is now in the error; a Host with no reason for the name,
// or no Explainer, leaves the plain refusal.
func TestUnknownToolExplained(t *testing.T) {
	t.Parallel()
	const down = `MCP server "files" is unavailable (failed: connection refused)`
	for _, tt := range []struct {
		name, code string
		explain    bool
		want       string
	}{
		{"explained", `tools.read_file`, true, "Uncaught TypeError: tools.read_file is not a tool of this job: " + down},
		{"explained, by name", `tools["read-file"]`, true, "tools.read-file is not a tool of this job: no such file tool"},
		{"no reason for it", `tools.other`, true, "tools.other is not a tool of this job (its tools are listed"},
		{"no Explainer", `tools.read_file`, false, "tools.read_file is not a tool of this job (its tools are listed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cat, fh := echoTools()
			var h Host = fh
			if tt.explain {
				h = explainHost{fh, map[string]string{"read_file": down, "read-file": "no such file tool"}}
			}
			out := cat.Run(context.Background(), tt.code, h, Limits{})
			if out.Err == nil || !strings.Contains(out.Err.Error(), tt.want) {
				t.Errorf("Err = %v, want it to say %q", out.Err, tt.want)
			}
			if len(fh.calls) != 0 {
				t.Errorf("calls %v, want none", fh.calls)
			}
		})
	}
}
