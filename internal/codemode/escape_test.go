package codemode

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dop251/goja"
)

// Escape attempts and allocations that would otherwise take the process
// down end with a clear error for the model.
func TestEscapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		code    string
		wantErr string
	}{
		{name: "require", code: `require("fs")`, wantErr: "ReferenceError: require is not defined"},
		{name: "import statement", code: `import fs from "fs"`, wantErr: "import is not available in code mode"},
		{name: "dynamic import", code: `const m = await import("fs")`, wantErr: "import is not available in code mode"},
		{name: "fetch", code: `await fetch("http://example.com")`, wantErr: "ReferenceError: fetch is not defined"},
		{name: "process", code: `process.exit(1)`, wantErr: "ReferenceError: process is not defined"},
		{name: "setTimeout", code: `setTimeout(() => {}, 0)`, wantErr: "ReferenceError: setTimeout is not defined"},
		{name: "setInterval", code: `setInterval(() => {}, 0)`, wantErr: "ReferenceError: setInterval is not defined"},
		{name: "queueMicrotask", code: `queueMicrotask(() => {})`, wantErr: "ReferenceError: queueMicrotask is not defined"},
		{name: "eval", code: `eval("1 + 1")`, wantErr: "EvalError: eval is not available in code mode"},
		{name: "Function", code: `new Function("return 1")()`, wantErr: "EvalError: the Function constructor is not available"},
		{name: "Function via a prototype", code: `(() => {}).constructor("return this")()`, wantErr: "EvalError: the Function constructor is not available"},
		{name: "AsyncFunction", code: `(async () => {}).constructor("return 1")`, wantErr: "EvalError: the AsyncFunction constructor is not available"},
		{name: "GeneratorFunction", code: `(function* () {}).constructor("yield 1")`, wantErr: "EvalError: the GeneratorFunction constructor is not available"},
		{name: "BigInt literal", code: "const x = 1;\nconst y = 2n ** 100000000n", wantErr: "SyntaxError: BigInt is not available in code mode (line 2)"},
		{name: "BigInt function", code: `BigInt(1)`, wantErr: "ReferenceError: BigInt is not defined"},
		{name: "typed arrays", code: `new Uint8Array(2 ** 31)`, wantErr: "ReferenceError: Uint8Array is not defined"},
		{name: "ArrayBuffer", code: `new ArrayBuffer(2 ** 31)`, wantErr: "ReferenceError: ArrayBuffer is not defined"},
		{name: "reserved name", code: `const __codemode_guard__ = (x) => x`, wantErr: "SyntaxError: the name __codemode_guard__ is reserved"},
		{name: "huge fill", code: `new Array(1e9).fill(0)`, wantErr: "RangeError: Array.prototype.fill: 1000000000 elements is over the code-mode limit"},
		{name: "huge repeat", code: `"x".repeat(2 ** 40)`, wantErr: "RangeError: String.prototype.repeat"},
		{name: "huge padStart", code: `"x".padStart(2 ** 40)`, wantErr: "RangeError: String.prototype.padStart"},
		{name: "huge Array.from", code: `Array.from({length: 1e9})`, wantErr: "RangeError: Array.from"},
		{name: "sparse array method", code: `const a = []; a[4e9] = 1; a.indexOf(2)`, wantErr: "RangeError: Array.prototype.indexOf"},
		{name: "join with a huge separator", code: `new Array(1000).join("x".repeat(1e6))`, wantErr: "RangeError: Array.prototype.join"},
		{name: "join of one big string many times", code: `const s = "x".repeat(1e6); new Array(1e6).fill(s).join("")`, wantErr: "RangeError: Array.prototype.join"},
		{name: "concat", code: `const a = new Array(4e6); a.concat(a, a)`, wantErr: "RangeError: Array.prototype.concat"},
		{name: "flat of a shared array", code: `let a = [1]; for (let i = 0; i < 30; i++) a = [a, a]; a.flat(Infinity)`, wantErr: "RangeError: Array.prototype.flat"},
		{name: "replace growing with $`", code: "\"x\".repeat(1e5).replaceAll(\"x\", \"$`\")", wantErr: "RangeError: String.prototype.replaceAll"},
		{name: "split into characters", code: `"x".repeat(5e6).split("")`, wantErr: "RangeError: String.prototype.split"},
		{name: "global match on a huge string", code: `"x".repeat(5e6).match(/x/g)`, wantErr: "RangeError: global RegExp match"},
		{name: "String.raw", code: `String.raw({raw: {length: 1e9}})`, wantErr: "RangeError: String.raw"},
		{name: "apply with a huge argument list", code: `Math.max.apply(null, new Array(1e7))`, wantErr: "RangeError: Function.prototype.apply"},
		{name: "object spread of a string", code: `const o = {..."x".repeat(1e7)}`, wantErr: "RangeError: spreading or enumerating the keys of a string"},
		{name: "for-in over a string", code: `for (const k in "x".repeat(1e7)) {}`, wantErr: "RangeError: spreading or enumerating the keys of a string"},
		{name: "Object.keys of a string", code: `Object.keys("x".repeat(1e7))`, wantErr: "RangeError: Object.keys of a string"},
		{name: "deeply nested toString", code: `let a = []; for (let i = 0; i < 1e5; i++) a = [a]; String(a)`, wantErr: "call stack exceeded"},
		{name: "deeply nested stringify", code: `let a = []; for (let i = 0; i < 1e5; i++) a = [a]; JSON.stringify(a)`, wantErr: "JSON.stringify: value nested deeper than 1000 levels"},
		{name: "deeply nested parse", code: `JSON.parse("[".repeat(1e5) + "]".repeat(1e5))`, wantErr: "JSON.parse: text nested deeper than 1000 levels"},
		{name: "deeply nested console.log", code: `let a = []; for (let i = 0; i < 1e5; i++) a = [a]; console.log(a); throw new Error("printed")`, wantErr: "Uncaught Error: printed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cat, h := echoTools()
			// No bound on how long it took: one of 10 s failed under the race
			// detector on a loaded 2-core machine (10.6 s filling the array
			// of the join case). An escape that does the work ends at the
			// wall time or the memory limit, not with wantErr.
			out := cat.Run(context.Background(), tt.code, h, Limits{WallTime: 20 * time.Second})
			if out.Err == nil || !strings.Contains(out.Err.Error(), tt.wantErr) {
				t.Fatalf("Err = %v, want it to contain %q", out.Err, tt.wantErr)
			}
		})
	}
}

// What goja offers beyond ECMAScript is not there, and what is there is
// ECMAScript.
func TestGlobals(t *testing.T) {
	t.Parallel()
	cat, h := echoTools()
	out := cat.Run(context.Background(), `Object.getOwnPropertyNames(globalThis).sort().join(" ")`, h, Limits{})
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	for _, absent := range []string{"require", "module", "exports", "process", "fetch", "setTimeout", "setInterval",
		"setImmediate", "queueMicrotask", "XMLHttpRequest", "WebSocket", "Deno", "Bun", "Buffer", "performance",
		"Uint8Array", "ArrayBuffer", "SharedArrayBuffer", "Atomics", "BigInt", "WeakRef", "FinalizationRegistry", "GoError", "WebAssembly"} {
		if strings.Contains(" "+out.Text+" ", " "+absent+" ") {
			t.Errorf("global %s is present", absent)
		}
	}
	for _, present := range []string{"Array", "JSON", "Math", "Promise", "Map", "Set", "RegExp", "Date", "console", "tools"} {
		if !strings.Contains(" "+out.Text+" ", " "+present+" ") {
			t.Errorf("global %s is missing", present)
		}
	}
}

// A runtime stuck inside a native function (here one the test adds; in
// practice a catastrophic regular expression) is abandoned after the
// grace period: Run returns and the Host is not called again.
func TestStuckRuntimeIsAbandoned(t *testing.T) {
	t.Parallel()
	// block reaches the wall time limit itself (Limits.wall), then holds
	// the runtime: a 100 ms timer raced the runtime's set-up on a busy
	// machine, and the limit could come before 'start' was printed or
	// block called. exited is when the abandoned runtime has returned.
	release, wall, exited := make(chan struct{}), make(chan time.Time), make(chan struct{})
	lim := Limits{WallTime: 100 * time.Millisecond, grace: 100 * time.Millisecond, wall: wall, exited: func() { close(exited) }}
	lim.hook = func(vm *goja.Runtime) {
		_ = vm.Set("block", func() { close(wall); <-release })
	}
	cat, h := echoTools()
	// Run returns while block still holds the runtime: release is closed
	// only after it.
	out := cat.Run(context.Background(), "console.log('start');\nblock();\nawait tools.echo({after: true})", h, lim)
	var le *LimitError
	if !errors.As(out.Err, &le) || le.Limit != "wall time" || !strings.Contains(out.Err.Error(), "abandoned") {
		t.Errorf("Err = %v", out.Err)
	}
	if out.Text != "start" {
		t.Errorf("Text = %q", out.Text)
	}
	close(release)
	// The abandoned runtime stops at its next instruction, without
	// calling the Host.
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the abandoned runtime did not return once released")
	}
	if calls := h.recorded(); len(calls) != 0 {
		t.Errorf("the Host was called after Run returned: %v", calls)
	}
}
