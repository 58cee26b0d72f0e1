package codemode

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

const hugeMarker = "[output truncated: the final value is 300000 bytes, only the start is shown]"

// attack is one case of TestAttacks.
type attack struct {
	name      string
	code      string
	lim       Limits
	want      string // Output.Text, when wantErr is ""
	wantErr   string // substring of Output.Err
	wantLimit string // LimitError.Limit, if any
	orErr     string // with wantLimit: a substring of Output.Err that will also do
	wantCalls int
}

// heavy reports whether the case makes the heap grow on purpose. The
// memory watchdog reads the process's heap, so such a case runs alone
// (TestAttacksOnMemory): beside the others, its growth (hundreds of MiB
// under the race detector on a busy machine) was charged to whichever
// execution sampled it, which then failed with "memory grew by ...".
func (a attack) heavy() bool { return a.lim.MaxMemory != 0 }

// What an attacker's script tries ends its execution with a clear error
// for the model, or behaves as ECMAScript says, and reaches nothing but
// the built-ins, console and tools.
func TestAttacks(t *testing.T) {
	t.Parallel()
	for _, tt := range attacks() {
		if tt.heavy() {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkAttack(t, tt)
		})
	}
}

// TestAttacksOnMemory runs the cases that grow the heap, one at a time and
// not in parallel with any test (see attack.heavy).
func TestAttacksOnMemory(t *testing.T) {
	for _, tt := range attacks() {
		if tt.heavy() {
			t.Run(tt.name, func(t *testing.T) { checkAttack(t, tt) })
		}
	}
}

// small guards built-ins as a 1 MiB memory limit would, without one.
var small = Limits{guardMemory: 1 << 20}

func attacks() []attack {
	return []attack{
		// Routes to the global object and to code compiled at run time.
		{name: "Function from this", code: `this.constructor.constructor("return this")()`, wantErr: "EvalError: the Function constructor is not available"},
		{name: "Function from globalThis", code: `globalThis.constructor.constructor("return process")()`, wantErr: "EvalError: the Function constructor"},
		{name: "Function from a tool", code: `tools.echo.constructor("return 1")()`, wantErr: "EvalError: the Function constructor"},
		{name: "Function from a bound method", code: `[].map.bind([]).constructor("return 1")()`, wantErr: "EvalError: the Function constructor"},
		{name: "Function through Reflect.construct", code: `Reflect.construct(Function, ["return 1"])`, wantErr: "EvalError: the Function constructor"},
		{name: "indirect eval", code: `(0, eval)("1")`, wantErr: "EvalError: eval is not available"},
		{name: "async generator constructor", code: `Object.getPrototypeOf(async function* () {}).constructor("return 1")`, wantErr: "SyntaxError"},
		{name: "sloppy this is the sandbox's global", code: `const g = (function () { return this })(); [g === globalThis, typeof g.process, typeof g.require]`, want: `[true,"undefined","undefined"]`},
		{name: "caller is not reachable", code: `function f() { return f.caller } String(f())`, want: "undefined"},
		{name: "GoError is gone", code: `typeof GoError`, want: "undefined"},
		{name: "WebAssembly", code: `WebAssembly.compile`, wantErr: "ReferenceError: WebAssembly is not defined"},
		{name: "SharedArrayBuffer", code: `new SharedArrayBuffer(8)`, wantErr: "ReferenceError: SharedArrayBuffer is not defined"},
		{name: "Atomics.wait", code: `Atomics.wait(null, 0, 0)`, wantErr: "ReferenceError: Atomics is not defined"},

		// Memory: refused before the allocation, or stopped by the watchdog.
		{name: "repeat 2**28", code: `'x'.repeat(2 ** 28)`, wantErr: "RangeError: String.prototype.repeat: 268435456 characters is over the code-mode limit"},
		{name: "doubling string", code: `let s = "x"; for (;;) s += s`, lim: Limits{MaxMemory: 8 << 20}, wantLimit: "memory"},
		// Which bound is met first depends on when the watchdog samples the
		// heap (a busy machine): either is a clear end.
		{name: "growing array", code: `const a = []; for (;;) a.push(1, 2, 3, 4, 5, 6, 7, 8)`, lim: Limits{MaxMemory: 8 << 20, guardMemory: 256 << 20}, wantLimit: "memory", orErr: "elements is over the code-mode limit"},
		{name: "new Array(1e9) is sparse", code: `new Array(1e9).length`, want: "1000000000"},
		{name: "filling new Array(1e9)", code: `new Array(1e9).fill(0)`, wantErr: "RangeError: Array.prototype.fill"},
		{name: "spreading new Array(1e9)", code: `[...new Array(1e9)]`, wantErr: "RangeError: Array.prototype.values"},

		// Built-ins whose result is many times their input, made in one
		// native step the watchdog cannot stop (small guards: 512 Ki
		// characters, 16 Ki elements, 4 Ki keys).
		{name: "String.prototype.concat", code: `const s = "x".repeat(4e5); "".concat(s, s)`, lim: small, wantErr: "RangeError: String.prototype.concat: 800000 characters is over the code-mode limit"},
		{name: "String.prototype.concat of many", code: `"".concat(...new Array(2000).fill("x".repeat(300)))`, lim: small, wantErr: "RangeError: String.prototype.concat"},
		{name: "concat still concatenates", code: `"a".concat("b", 1, null, {toString() { return "c" }})`, lim: small, want: "ab1nullc"},
		{name: "normalize NFKD of U+FDFA", code: `"\uFDFA".repeat(3e4).normalize("NFKD")`, lim: small, wantErr: "RangeError: String.prototype.normalize (NFKD can make a string 18 times longer)"},
		{name: "normalize of ASCII", code: `"x".repeat(4e5).normalize("NFKD").length`, lim: small, want: "400000"},
		{name: "normalize still normalizes", code: `["e\u0301".normalize(), "\u00e9".normalize("NFD").length]`, want: `["é",2]`},
		{name: "encodeURIComponent growing", code: `encodeURIComponent("é".repeat(1e5))`, lim: small, wantErr: "RangeError: encodeURIComponent: the result"},
		{name: "escape growing", code: `escape("\u0101".repeat(1e5))`, lim: small, wantErr: "RangeError: escape: the result"},
		{name: "encodeURIComponent by pieces", code: `const u = "\ud83d\ude00é"; encodeURIComponent(u.repeat(25000)) === encodeURIComponent(u).repeat(25000)`, lim: small, want: "true"},
		{name: "JSON.parse of many values", code: `JSON.parse("[" + "1,".repeat(2e4) + "1]")`, lim: small, wantErr: "RangeError: JSON.parse: the text: 20001 values is over the code-mode limit"},
		{name: "JSON.parse of many arrays", code: `JSON.parse("[" + "[],".repeat(5000) + "[]]")`, lim: small, wantErr: "RangeError: JSON.parse: the text: 5002 arrays and objects"},
		{name: "JSON.parse commas in strings", code: `JSON.parse('["' + ",".repeat(1e5) + '"]')[0].length`, lim: small, want: "100000"},
		{name: "JSON.stringify of a string to escape", code: `JSON.stringify("\n".repeat(1e5))`, lim: small, wantErr: "RangeError: JSON.stringify: a string with characters to escape"},
		{name: "JSON.stringify of a key to escape", code: `JSON.stringify({["\n".repeat(1e5)]: 1})`, lim: small, wantErr: "RangeError: JSON.stringify: a string with characters to escape"},
		{name: "JSON.stringify of a long plain string", code: `JSON.stringify("x".repeat(1e5)).length`, lim: small, want: "100002"},
		{name: "Object.entries of a long array", code: `Object.entries(new Array(5000).fill(0))`, lim: small, wantErr: "RangeError: Object.entries of an array: 5000 elements"},
		// A guard read a length, count or separator, and the built-in read
		// it again: a getter or valueOf answering 1, then 1e5 (or 1e9 at
		// the default limits: a fatal allocation) went past the guard.
		{name: "fill of an array-like whose length changes", code: `let n = 0; const o = {get length() { return n++ ? 1e5 : 1 }}; Array.prototype.fill.call(o, 0); Object.keys(o).length`, lim: small, want: "2"},
		{name: "slice of an array-like whose length changes", code: `let n = 0; const o = {get length() { return n++ ? 1e5 : 1 }}; Array.prototype.slice.call(o).length`, lim: small, want: "1"},
		{name: "Array.from of an array-like whose length changes", code: `let n = 0; Array.from({get length() { return n++ ? 1e5 : 1 }}).length`, lim: small, want: "1"},
		{name: "apply of an array-like whose length changes", code: `const mk = () => { let n = 0; return {0: 7, get length() { return n++ ? 1e6 : 1 }} }; [Math.max.apply(null, mk()), Reflect.apply(Math.max, null, mk()), Reflect.construct(Array, mk()).length]`, lim: small, want: "[7,7,7]"},
		{name: "a Proxy's length trap", code: `let n = 0; const p = new Proxy([], {get(t, k) { return k === "length" ? (n++ ? 1e5 : 1) : t[k] }}); Array.prototype.fill.call(p, 0); [p[0], 1 in p]`, lim: small, want: "[0,false]"},
		{name: "Reflect.apply with a huge argument list", code: `Reflect.apply(Math.max, null, new Array(1e7))`, wantErr: "RangeError: Reflect.apply: 10000000 arguments is over the code-mode limit"},
		{name: "Reflect.construct with a huge argument list", code: `Reflect.construct(Array, new Array(1e7))`, wantErr: "RangeError: Reflect.construct: 10000000 arguments is over the code-mode limit"},
		{name: "Reflect.apply and construct still work", code: `[Reflect.apply(Math.max, null, [1, 3]), Reflect.apply(function () { return this.x }, {x: 5}, []), Reflect.construct(Date, [0]).getTime(), Reflect.construct(function () { this.t = new.target === Object }, [], Object).t]`, want: "[3,5,0,true]"},
		{name: "String.raw whose raw changes", code: `let n = 0; String.raw({get raw() { return n++ ? {length: 1e5} : ["a", "b"] }}, "-")`, lim: small, want: "a-b"},
		{name: "repeat count read twice", code: `let n = 0; "x".repeat({valueOf() { return n++ ? 1e6 : 1 }}).length`, lim: small, want: "1"},
		{name: "padStart length read twice", code: `let n = 0; "x".padEnd({valueOf() { return n++ ? 1e6 : 2 }}).length`, lim: small, want: "2"},
		{name: "split separator read twice", code: `let n = 0; "x".repeat(1e5).split({toString() { return n++ ? "" : "y" }}).length`, lim: small, want: "1"},
		{name: "Symbol.split read twice", code: `let n = 0; const sp = {get [Symbol.split]() { return n++ ? undefined : () => ["mine"] }, toString() { return "" }}; "x".repeat(1e5).split(sp)`, lim: small, want: `["mine"]`},
		{name: "Symbol.replace read twice", code: `let n = 0; const rp = {get [Symbol.replace]() { return n++ ? undefined : () => "mine" }, toString() { return "x" }}; "x".repeat(1e5).replaceAll(rp, "$` + "`" + `")`, lim: small, want: "mine"},
		{name: "the guarded built-ins still work", code: `["a-b-c".split("-", 2), "a-b".split(), "a1b2".split(/\d/), "aXbX".replace("X", "$&$&"), "aXbX".replace(/x/gi, "-"), "aXbX".replaceAll(/X/g, () => "z"), Array.prototype.map.call({length: 2, 0: "a", 1: "b"}, x => x + x), Reflect.construct(Date, [0]).getTime(), String.raw` + "`a${1}b`" + `, Array.prototype.push.call({length: 1}, 9), new Proxy([1, 2], {}).map(x => x * 2), (function () { return Array.prototype.slice.call(arguments, 1) })(1, 2, 3), "x".padStart(3, "ab"), "ab".repeat(2)]`,
			want: `[["a","b"],["a-b"],["a","b",""],"aXXbX","a-b-","azbz",["aa","bb"],0,"a1b",2,[2,4],[2,3],"abx","abab"]`},
		{name: "a RegExp's global read twice", code: `let n = 0; const re = /x/; Object.defineProperty(re, "global", {get() { return n++ > 0 }}); "x".repeat(5e4).match(re)`, lim: small, wantErr: "RangeError: global RegExp match on a string"},
		{name: "RegExp.prototype.flags replaced", code: `let n = 0; Object.defineProperty(RegExp.prototype, "flags", {get() { return n++ ? "g" : "" }}); "x".repeat(5e4).replace(/x/, "$&".repeat(100)).length`, lim: small, wantErr: "RangeError: global RegExp replace on a string"},
		{name: "standard RegExps as before", code: `["x".repeat(5e4).match(/x/).index, "x".repeat(5e4).replace(/x/, "y").length, "aXbX".match(/X/g), "abc".replace(/b/, "$&$&")]`, lim: small, want: `[0,50000,["X","X"],"abbc"]`},
		{name: "flatMap of a long result", code: `const big = new Array(16000).fill(0); new Array(100).fill(0).flatMap(() => big).length`, lim: small, wantErr: "RangeError: Array.prototype.flatMap"},
		{name: "flat through an index getter", code: `let n = 0; const big = new Array(16000).fill(0); const o = []; Object.defineProperty(o, 0, {get() { return n++ ? [big] : 1 }}); new Array(100).fill(o).flat(3).length`, lim: small, wantErr: "RangeError: Array.prototype.flat"},
		{name: "concat of a spreadable whose length changes", code: `let n = 0; [].concat({[Symbol.isConcatSpreadable]: true, get length() { return n++ ? 1e5 : 1 }, 0: "a"})`, lim: small, want: `["a"]`},
		{name: "concat of a Proxy of an array", code: `let n = 0; [].concat(new Proxy([], {get(t, k) { return k === "length" ? (n++ ? 1e5 : 1) : t[k] }})).length`, lim: small, want: "1"},
		{name: "flat, flatMap and concat still work", code: `[[1, [2, [3, [4]]]].flat(), [1, [2, [3, [4]]]].flat(Infinity), [1, , 3].flat(), [1, 2].flatMap(x => [x, [x * 10]]), [1].concat(2, [3, 4], [[5]]), [].concat.call(1, 2).length, [1].concat({length: 1, 0: 9}), [1].concat({[Symbol.isConcatSpreadable]: true, length: 2, 0: "a"}), Array.prototype.flat.length, Array.prototype.flatMap.length]`, lim: small,
			want: `[[1,2,[3,[4]]],[1,2,3,4],[1,3],[1,[10],2,[20]],[1,2,3,4,[5]],2,[1,{"0":9,"length":1}],[1,"a",null],0,1]`},
		{name: "replaceAll with a non-global RegExp", code: `"ab".replaceAll(/a/, "x")`, wantErr: "TypeError: replaceAll must be called with a global RegExp"},
		// with put a property named like the guard in scope (a computed
		// key: no identifier for the reserved-name check), so a spread or
		// for-in called it instead of the guard: at the default limits a
		// spread of 100 million characters in one native step.
		{name: "with shadowing the spread guard", code: `with ({["__codemode" + "_guard__"]: x => x}) { ({..."x".repeat(5000)}) }`, lim: small, wantErr: "SyntaxError: with is not available in code mode (line 1): name the object instead"},
		{name: "with shadowing the for-in guard", code: "const o = {};\no[\"__codemode_guard__\"] = x => x;\nwith (o) { for (const k in \"x\".repeat(5000)) {} }", lim: small, wantErr: "SyntaxError: with is not available in code mode (line 3)"},
		// A Proxy went past the key guards: they read a Proxy of a String
		// object as no string, and an array's length through the Proxy's
		// trap, while the built-in listed the target's keys natively, one
		// per character or element (at the default limits, 130 million).
		{name: "Object.keys of a Proxy of a String object", code: `Object.keys(new Proxy(new String("x".repeat(5000)), {}))`, lim: small, wantErr: "RangeError: Object.keys of a string: 5000 characters is over the code-mode limit"},
		{name: "spread of a Proxy of a String object", code: `({...new Proxy(new Proxy(new String("x".repeat(5000)), {}), {})})`, lim: small, wantErr: "RangeError: spreading or enumerating the keys of a string"},
		{name: "for-in over a Proxy of a String object", code: `for (const k in new Proxy(new String("x".repeat(5000)), {})) {}`, lim: small, wantErr: "RangeError: spreading or enumerating the keys of a string"},
		{name: "Object.keys of a Proxy with a lying length", code: `Object.keys(new Proxy(new Array(16000).fill(0), {get: (t, k) => k === "length" ? 1 : t[k]}))`, lim: small, wantErr: "RangeError: Object.keys of an array: 16000 elements"},
		{name: "getOwnPropertySymbols of a Proxy of a String object", code: `Object.getOwnPropertySymbols(new Proxy(new String("x".repeat(5000)), {}))`, lim: small, wantErr: "RangeError: Object.getOwnPropertySymbols of a string"},
		{name: "JSON.stringify of a Proxy of a String object", code: `JSON.stringify({a: [new Proxy(new String("x".repeat(5000)), {})]})`, lim: small, wantErr: "RangeError: JSON.stringify of a string"},
		{name: "Object.freeze of a String object", code: `Object.freeze(new String("x".repeat(5000)))`, lim: small, wantErr: "RangeError: Object.freeze of a string"},
		{name: "Object.isSealed of a long array", code: `Object.isSealed(new Array(16000).fill(0))`, lim: small, wantErr: "RangeError: Object.isSealed of an array"},
		{name: "what the key guards let through", code: `[Object.isFrozen(Object.freeze({a: 1})), Object.isSealed(Object.seal([1])), JSON.stringify(new Proxy({a: [1]}, {})), Object.getOwnPropertySymbols({[Symbol.iterator]: 1}).length, Object.freeze(1), Object.isFrozen("x".repeat(5000)), Object.keys(new Proxy(new String("ab"), {}))]`, lim: small,
			want: `[true,true,"{\"a\":[1]}",1,1,true,["0","1"]]`},
		// Compiling a pattern is about 200 bytes of Go per character in
		// one native step: new RegExp("a".repeat(1e8)) was gigabytes.
		{name: "RegExp of a long pattern", code: `new RegExp("a".repeat(5000))`, lim: small, wantErr: "RangeError: RegExp: the pattern: 5000 characters is over the code-mode limit of 1024"},
		{name: "RegExp called without new", code: `RegExp("a".repeat(5000))`, lim: small, wantErr: "RangeError: RegExp: the pattern"},
		{name: "RegExp subclass", code: `class R extends RegExp {}; new R("a".repeat(5000))`, lim: small, wantErr: "RangeError: RegExp: the pattern"},
		{name: "RegExp of a RegExp-like", code: `new RegExp({source: "a".repeat(5000), [Symbol.match]: true})`, lim: small, wantErr: "RangeError: RegExp: the pattern"},
		{name: "match of a long string", code: `"x".match({toString() { return "a".repeat(5000) }})`, lim: small, wantErr: "RangeError: RegExp: the pattern"},
		{name: "search of a long string", code: `"x".search("a".repeat(5000))`, lim: small, wantErr: "RangeError: RegExp: the pattern"},
		{name: "matchAll of a long string", code: `"x".matchAll("a".repeat(5000))`, lim: small, wantErr: "RangeError: RegExp: the pattern"},
		{name: "compile is gone", code: `typeof /x/.compile`, want: `undefined`},
		{name: "RegExp as before", code: `const re = /a(b)/g; class R extends RegExp { exec(s) { return super.exec(s) } }; [new RegExp("a", "g").flags, RegExp(re) === re, new RegExp(re) !== re, new RegExp(re, "i").flags, /x/ instanceof RegExp, new R("ab").test("xab"), new R("b") instanceof R, RegExp.prototype.constructor === RegExp, "aXbX".match(/X/g), "abc".search("c"), [..."a1b2".matchAll(/\d/g)].map(m => m[0]), "a.b".match("."), "abc".match({[Symbol.match]: () => "mine"}), RegExp.length, RegExp.name, RegExp[Symbol.species] === RegExp, "a,b".split(/,/), "x".match(), new RegExp().source, String(new RegExp(undefined, "g")), "a".repeat(1000).search("a".repeat(1000))]`, lim: small,
			want: `["g",true,true,"i",true,true,true,true,["X","X"],2,["1","2"],["a"],"mine",2,"RegExp",true,["a","b"],[""],"(?:)","/(?:)/g",0]`},
		{name: "matchAll of a non-global RegExp", code: `"x".matchAll(/x/)`, wantErr: "TypeError: String.prototype.matchAll called with a non-global RegExp argument"},
		{name: "spreading a long array into an object", code: `({...new Array(5000).fill(0)})`, lim: small, wantErr: "RangeError: spreading or enumerating the keys of an array"},

		// Time: the interrupt reaches loops, microtasks and async recursion.
		{name: "microtask starvation", code: `while (true) { await null }`, lim: Limits{WallTime: 200 * time.Millisecond}, wantLimit: "wall time"},
		{name: "async recursion through await", code: `async function f(n) { await null; return f(n + 1) }; await f(0)`, lim: Limits{WallTime: 200 * time.Millisecond}, wantLimit: "wall time"},
		{name: "deep async recursion", code: `async function f(n) { return await f(n + 1) }; await f(0)`, lim: Limits{MaxStackDepth: 200}, wantLimit: "call stack"},
		{name: "never-settling promise returned", code: `return new Promise(() => {})`, wantErr: "it awaits a promise that never settles"},

		// Tool calls: a flood stops at the limit, awaited or not.
		{name: "unawaited call flood", code: `for (;;) tools.echo({})`, lim: Limits{MaxCalls: 5}, wantLimit: "tool calls", wantCalls: 5},
		{name: "10,000 calls in Promise.all", code: `await Promise.all(Array.from({length: 10000}, (_, i) => tools.echo({i})))`, lim: Limits{MaxCalls: 5}, wantLimit: "tool calls", wantCalls: 5},
		{name: "flood caught by the code", code: `for (let i = 0; i < 1e4; i++) { try { await tools.echo({}) } catch (e) {} }; return "went on"`, lim: Limits{MaxCalls: 5}, wantLimit: "tool calls", wantCalls: 5},

		// Printing what cannot be printed.
		{name: "circular console.log", code: `const o = {}; o.o = o; console.log(o); "end"`, want: "[unprintable object: TypeError: Converting circular structure to JSON]\nend"},
		{name: "throwing toJSON and toString", code: `console.log({toJSON() { throw new Error("tj") }, toString() { throw new Error("ts") }}); "end"`, want: "[unprintable object: Error: tj]\nend"},
		{name: "looping toJSON", code: `console.log({toJSON() { for (;;) {} }})`, lim: Limits{WallTime: 200 * time.Millisecond}, wantLimit: "wall time"},
		{name: "looping getter in the final value", code: `return {get x() { for (;;) {} }}`, lim: Limits{WallTime: 200 * time.Millisecond}, wantLimit: "wall time"},
		{name: "function with a throwing name", code: `const f = () => 1; Object.defineProperty(f, "name", {get() { throw new Error("no") }}); console.log(f); "end"`, want: "[Function (anonymous)]\nend"},
		{name: "cyclic final value", code: `const o = {}; o.self = o; o`, want: "[unprintable object: TypeError: Converting circular structure to JSON]"},
		{name: "huge final value is cut", code: `"x".repeat(3e5)`, lim: Limits{MaxOutput: 200}, want: strings.Repeat("x", 200-len(hugeMarker)-1) + "\n" + hugeMarker},
		// 1.7 s alone under -race; 5 s was reached with the package's
		// other tests beside it on a loaded machine (load 4.5 on 2 cores).
		{name: "30,000 long console arguments", code: `console.log(...Array.from({length: 30000}, () => "x".repeat(100))); "end"`, lim: Limits{WallTime: 30 * time.Second, MaxOutput: 100},
			want: strings.Repeat("x", 12) + "\n[output truncated: 1 console lines not shown or cut; the output limit is 100 bytes]\nend"},

		// Arguments: read once, serialised to a JSON object, own string keys only.
		{name: "getter changing on second read", code: `let n = 0; const a = {get path() { return ++n === 1 ? "/ok" : "/etc/passwd" }}; const r = await tools.echo(a); [r.args.path, n]`, want: `["/ok",1]`, wantCalls: 1},
		{name: "throwing getter", code: `await tools.echo({get x() { throw new Error("getter") }})`, wantErr: "Uncaught Error: getter"},
		{name: "__proto__ key stays data", code: `(await tools.echo(JSON.parse('{"__proto__": {"admin": true}, "a": 1}'))).args.__proto__.admin`, want: "true", wantCalls: 1},
		{name: "__proto__ literal sets the prototype only", code: `(await tools.echo({__proto__: {admin: true}, a: 1})).args`, want: `{"a":1}`, wantCalls: 1},
		{name: "symbol keys are dropped", code: `(await tools.echo({[Symbol("s")]: 1, a: 2})).args`, want: `{"a":2}`, wantCalls: 1},
		{name: "Proxy argument", code: `(await tools.echo(new Proxy({a: 1}, {get: (t, k) => k === "a" ? 2 : t[k]}))).args`, want: `{"a":2}`, wantCalls: 1},
		{name: "Proxy with a throwing trap", code: `await tools.echo(new Proxy({}, {ownKeys() { throw new Error("trap") }}))`, wantErr: "Uncaught Error: trap"},
		{name: "toJSON to a string", code: `await tools.echo({toJSON() { return "x" }})`, wantErr: "TypeError: tools.echo takes an object of named parameters; its argument serialised to a string"},
		{name: "Date argument", code: `await tools.echo(new Date(0))`, wantErr: "serialised to a string"},
		{name: "toJSON on Object.prototype", code: `Object.prototype.toJSON = () => [1]; await tools.echo({a: 1})`, wantErr: "serialised to an array"},
		{name: "toJSON to a number", code: `await tools.echo({toJSON: () => 7})`, wantErr: "serialised to 7"},
		// What JSON cannot carry was sent changed without a word: NaN and
		// Infinity as null, a Set or Map as {}, a function left out.
		{name: "Infinity", code: `await tools.echo({n: 1 / 0})`, wantErr: `TypeError: tools.echo: the argument's field "n" is Infinity, which JSON cannot carry (it would be sent as null): pass a finite number, or null`},
		{name: "NaN in an array", code: `await tools.echo({a: [1, NaN]})`, wantErr: `the argument's element 1 is NaN, which JSON cannot carry`},
		{name: "-Infinity from toJSON", code: `await tools.echo({o: {toJSON: () => -Infinity}})`, wantErr: `field "o" is -Infinity`},
		{name: "Set field", code: `await tools.echo({ids: new Set([1, 2])})`, wantErr: `field "ids" is a Set, which JSON cannot carry (it would be sent as {}): pass an array ([...set])`},
		{name: "Map field", code: `await tools.echo({m: new Map([["a", 1]])})`, wantErr: `field "m" is a Map`},
		{name: "function field", code: `await tools.echo({cb() {}})`, wantErr: `field "cb" is a function, which JSON cannot carry (it would be left out)`},
		{name: "symbol field", code: `await tools.echo({s: Symbol("x")})`, wantErr: `field "s" is a symbol`},
		{name: "Map argument", code: `await tools.echo(new Map([["a", 1]]))`, wantErr: `tools.echo takes an object of named parameters, not a Map: pass Object.fromEntries(map)`},
		{name: "Set argument", code: `await tools.echo(new Set([1]))`, wantErr: `not a Set`},
		{name: "what JSON carries still goes", code: `(await tools.echo({d: new Date(0), u: undefined, n: null, big: 1e308, list: [null, -0]})).args`,
			want: `{"big":1e+308,"d":"1970-01-01T00:00:00.000Z","list":[null,0],"n":null}`, wantCalls: 1},

		// Tampering with tools and the built-ins the prelude relies on.
		{name: "redefining a tool", code: `tools.echo = () => "mine"; delete tools.echo; typeof tools.echo`, want: "function"},
		{name: "defining a tool", code: `Object.defineProperty(tools, "x", {value: 1})`, wantErr: "TypeError: Cannot define property x, object is not extensible"},
		{name: "prototype of tools", code: `Object.setPrototypeOf(tools, {x: 1})`, wantErr: "Uncaught TypeError: tools cannot be changed"},
		{name: "Object.prototype does not add tools", code: `Object.prototype.evil = () => 1; typeof tools.evil`, want: "undefined"},
		{name: "JSON and Promise replaced", code: `JSON.stringify = () => '{"evil":1}'; JSON.parse = () => ({evil: 1}); globalThis.Promise = function () {}; (await tools.echo({a: 1})).args`, want: `{"a":1}`, wantCalls: 1},
		{name: "symbol-named tool", code: `typeof tools[Symbol.iterator]`, want: "undefined"},
		{name: "tools as a string", code: `[String(tools), tools + "", ` + "`${tools}`" + `]`, want: `["[object tools]","[object tools]","[object tools]"]`},

		// goja's TypeError for an object without toString or valueOf
		// printed the Go struct: addresses and the object's own strings.
		{name: "null-prototype object as a string", code: `String({__proto__: null, secret: "s3cr3t"})`, wantErr: "Uncaught TypeError: Cannot convert object to primitive value"},
		{name: "null-prototype object as a number", code: `+Object.create(null)`, wantErr: "Uncaught TypeError: Cannot convert object to primitive value"},
		{name: "conversion error printed", code: `try { "" + Object.create(null) } catch (e) { console.log(e) }; "end"`, want: "TypeError: Cannot convert object to primitive value\nend"},

		// Throwing what is not an Error.
		{name: "throw a symbol", code: `throw Symbol("s")`, wantErr: "Uncaught Symbol(s)"},
		{name: "throw null", code: `throw null`, wantErr: "Uncaught null"},
		{name: "throw a null-prototype object", code: `throw Object.create(null)`, wantErr: "Uncaught {}"},
		{name: "throw a Proxy whose traps throw", code: `throw new Proxy({}, {get() { throw 1 }, getPrototypeOf() { throw 2 }})`, wantErr: "Uncaught [unprintable object:"},
		{name: "throw a Proxy that throws Proxies", code: `const mk = () => new Proxy({}, {getPrototypeOf() { throw mk() }, get() { throw mk() }}); throw mk()`, wantErr: "Uncaught [unprintable object:"},
		{name: "throw an Error whose name throws", code: `const e = new Error("m"); e.name = {toString() { throw e }}; throw e`, wantErr: "Uncaught Error: m"},
		{name: "throw an Error whose message loops", code: `const e = new Error("x"); Object.defineProperty(e, "message", {get() { for (;;) {} }}); throw e`, lim: Limits{WallTime: 200 * time.Millisecond}, wantLimit: "wall time"},
	}
}

func checkAttack(t *testing.T, tt attack) {
	t.Helper()
	cat, h := echoTools()
	out := cat.Run(context.Background(), tt.code, h, tt.lim)
	switch {
	case tt.wantLimit != "":
		var le *LimitError
		if tt.orErr != "" && out.Err != nil && strings.Contains(out.Err.Error(), tt.orErr) {
			break
		}
		if !errors.As(out.Err, &le) || le.Limit != tt.wantLimit {
			t.Fatalf("Err = %v, want a %q LimitError", out.Err, tt.wantLimit)
		}
	case tt.wantErr != "":
		if out.Err == nil || !strings.Contains(out.Err.Error(), tt.wantErr) {
			t.Fatalf("Err = %v, want it to contain %q", out.Err, tt.wantErr)
		}
	default:
		if out.Err != nil {
			t.Fatalf("Err = %v, want none (text %.200q)", out.Err, out.Text)
		}
		if out.Text != tt.want {
			t.Errorf("Text = %.300q, want %.300q", out.Text, tt.want)
		}
	}
	// Nothing of the host's Go values reaches the model.
	for _, leak := range []string{"&{", "*goja.", "0xc0", "/internal/codemode"} {
		if strings.Contains(out.Text, leak) || out.Err != nil && strings.Contains(out.Err.Error(), leak) {
			t.Errorf("the output shows %q of the host: %.300q, %v", leak, out.Text, out.Err)
		}
	}
	if strings.Contains(out.Text, "went on") {
		t.Errorf("the code went on past a limit: %q", out.Text)
	}
	if out.Calls != tt.wantCalls || len(h.recorded()) != tt.wantCalls {
		t.Errorf("Calls = %d (recorded %d), want %d", out.Calls, len(h.recorded()), tt.wantCalls)
	}
}

// A thrown value of megabytes was the execution's error whole (Output.Text
// is bounded by MaxOutput, the error was not): it is cut there now, with
// how long it was.
func TestThrownValueIsCut(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, code, want string }{
		{"a string", `throw "x".repeat(1e6)`, `Uncaught "xxx`},
		{"an Error", `throw new Error("y".repeat(1e6))`, "Uncaught Error: yyy"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cat, h := echoTools()
			out := cat.Run(context.Background(), tt.code, h, Limits{MaxOutput: 1000})
			if out.Err == nil {
				t.Fatal("no error")
			}
			msg := out.Err.Error()
			if len(msg) > 1200 || !strings.HasPrefix(msg, tt.want) || !strings.Contains(msg, " bytes]") {
				t.Errorf("error of %d bytes: %.200q...%q", len(msg), msg, msg[max(0, len(msg)-100):])
			}
		})
	}
}
