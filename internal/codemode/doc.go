// Package codemode is the sandbox half of code mode: the model writes a
// short JavaScript program against typed tool wrappers instead of passing
// every intermediate result through its context.
//
//	const logs = await tools.logging_getLogs({level: "error"});
//	const distinct = [...new Set(logs.map(l => l.message))];
//	for (const m of distinct) await tools.tickets_create({title: m});
//	return distinct.length;
//
// A Catalog holds the tools of a job and their JavaScript identifiers
// (Ident: the model-facing name in identifier form, collisions resolved
// deterministically). Catalog.Run executes code; Catalog.Declarations
// gives the TypeScript declarations get_tool_details serves;
// Catalog.Index gives the compact, byte-stable index for the
// execute_code description. The agent loop provides a Host: it runs
// each inner call (its checks, events, journal) and supplies the clock
// and random values.
//
// # Why goja
//
// goja is a pure-Go ECMAScript 2020+ engine: no cgo, no second process,
// one fresh runtime per execution (about 3 ms and 0.8 MB with three tool
// calls, most of it the prelude; see BenchmarkRun), async functions and promises, an interrupt for wall
// time, and a call-stack limit. It offers nothing of Node or the browser:
// no require, import, fetch, process or timers. What it lacks, memory
// accounting and interrupts inside native built-ins, is worked around
// below and documented where it remains.
//
// # Execution
//
// The code is the body of an async arrow function, so top-level await
// works; its return value, or the value of its last expression statement,
// is the final value. goja has no async iteration (for await, async
// function*, Symbol.asyncIterator): a syntax error says so and what to
// write instead (await in a plain loop, Promise.all). tools.x(args) is an async function (x the tool's
// identifier; tools["name"] under its name reaches it too; a tool named
// then, toJSON, toString, valueOf or toLocaleString, names JavaScript
// reads on any object by itself, is tools.then_ and so on, never
// tools.then, so tools is no thenable and converts to no call): it serialises
// args (an object; one that a toJSON method turns into anything else is
// refused with a TypeError, as is a value JSON cannot carry: NaN and
// ±Infinity, sent as null, a Map or Set, sent as {}, a function or symbol,
// left out; undefined is left out, an optional parameter not given) to
// JSON and calls Host.Call synchronously before
// returning its promise, so the calls of one execution run one at a time
// in the order the code makes them, Promise.all included. Parallel calls
// would save time; a fixed order is what lets a replay match calls by
// sequence number, so it wins. A tool returns its structured content when
// it has some, else its text parsed as JSON, else the text (numbers: see
// below; one over the JSON.parse guards' limits, see Limits, throws a
// RangeError naming the tool, carrying .tool); a tool error
// throws an Error named ToolError with the server's text, a refusal from
// the Host an Error with its message, both catchable and carrying .tool.
// A Host error made with Abort ends the execution instead (a replay that
// diverged must not be caught by the code). tools.x for a name that is no
// tool throws a TypeError, with the Host's reason when it is an Explainer
// (the agent loop's: the tool's server is down).
//
// A number of a tool's result that a JavaScript number cannot hold comes
// as a string of its digits exactly as the tool wrote them, never rounded
// or null: an integer (no fraction or exponent) beyond ±(2^53-1),
// Number.MAX_SAFE_INTEGER (IDs of 64 bits and more; "12345678901234567"
// and "9007199254740992" too, though a float64 holds the latter, so that
// one field is a string for all its large values, not for some), a
// number beyond float64's range ("1e400", "-1e400"), and a non-zero one
// that would underflow to 0 ("1e-400"). Other numbers are JavaScript
// numbers (0.1 and 12345678901234567890.5 rounded to the nearest float64,
// as everywhere in JavaScript). BigInt is not offered (see Limits), and a
// string keeps the exact value for printing, comparing and passing on:
// the code can test typeof x === "string" to tell. The code's own
// JSON.parse follows JavaScript: 1e400 is Infinity (goja's, which uses
// Go's encoding/json, threw a Go error for it).
//
// Only what console prints (log, info and debug as they are; warn and
// error prefixed "[warn] " and "[error] ") and the final value come back,
// in Output.Text, at most Limits.MaxOutput bytes: when both do not fit
// the value keeps up to half the budget, and each cut part ends with an
// "[output truncated: ...]" marker. Rejections nothing handled are
// reported as "[error] unhandled rejection: ..." lines. The text of a
// value thrown and not caught (in Output.Err, or such a line) is cut at
// MaxOutput bytes too, with a "[thrown value truncated: ...]" marker.
//
// # Determinism
//
// A run depends only on the code and on what the Host returns: Date.now(),
// new Date() and Date() read Host.Now, Math.random() reads Host.Random,
// each with its own sequence number, and there are no timers, no I/O and
// nothing garbage-collector dependent (WeakRef and FinalizationRegistry
// are removed). A replay whose Host returns the recorded values takes the
// same path. One caveat: goja formats local time with the process's time
// zone (time.Local), so a replay on a worker with another TZ prints
// another Date().toString(); workers should share a TZ (UTC).
//
// # Limits
//
// Limits bound each execution; every limit ends it with a *LimitError
// (errors.Is(err, ErrLimit)) the code cannot catch:
//
//   - WallTime: an interrupt from a watchdog goroutine, also on context
//     cancellation; the Host.Call context is cancelled too.
//   - MaxCalls: the call after the last allowed one ends the execution.
//   - MaxValues: likewise for clock reads and random values together
//     (the agent loop journals each; a busy wait on Date.now() wrote
//     entries until the wall time).
//   - MaxStackDepth: goja's call-stack limit.
//   - MaxCode: the size of the code.
//   - MaxOutput: not an error; the output is cut with a marker.
//   - MaxMemory: goja cannot account memory per runtime, so the watchdog
//     samples the process's Go heap every 10 ms and stops the execution
//     when, since it started, the live heap grew by more than MaxMemory or
//     the heap with its garbage by more than twice that. It is process
//     wide: an execution running beside another that allocates may be
//     stopped too. A single large allocation is only seen once it is done
//     (the Go runtime holds other goroutines during a huge copy), so a
//     doubling string can overshoot the limit up to about four times.
//
// goja's interrupt only acts between JavaScript instructions, not inside
// a native built-in, and a native built-in can allocate or loop without
// bound in one step. The prelude (prelude.js) therefore removes binary
// data (ArrayBuffer, typed arrays, DataView, Atomics) and BigInt (one
// operator could allocate gigabytes; BigInt literals are refused when the
// code is parsed), bans eval and the Function constructors (so all code
// that runs was checked), and guards the built-ins whose work is not
// bounded by the memory already in use, with caps derived from MaxMemory
// (strings of MaxMemory/2 characters, MaxMemory/64 array elements,
// MaxMemory/256 keys from a string or an array): repeat, padStart/padEnd,
// concat, replace/replaceAll and split on strings, normalize (up to 18
// times longer: refused over MaxMemory/36 characters unless ASCII),
// encodeURI, encodeURIComponent and escape (applied piece by piece, the
// result at most the string cap), global RegExp match, replace
// and split, every Array.prototype method (over the receiver's length;
// join, toLocaleString, concat and flat over their result), Array.from,
// String.raw, apply and Reflect.apply/construct (at most 131072
// arguments), Object.keys/values/entries/assign/freeze/seal (and the like)
// and object spread and for-in of a string or an array, a Proxy judged by
// its innermost target, whose keys the built-in lists (for spread and
// for-in the code is rewritten to pass the operand through a guard,
// which is why with, which could put a property of that name in scope,
// is refused when the code is parsed),
// the RegExp constructor and String match, matchAll and search of a
// string (a pattern of at most MaxMemory/1024 characters: compiling one
// costs about 200 bytes a character; RegExp.prototype.compile is removed),
// and JSON.parse and JSON.stringify (at most
// 1000 levels; parse at most MaxMemory/64 values and MaxMemory/256 arrays
// and objects; stringify runs through a replacer, so it can be
// interrupted, and refuses a string over a sixth of the string cap that
// has characters to escape). A guard reads what it checks once and hands
// the built-in that (the number, the string, or an array-like through a
// Proxy pinning the length it checked), so a getter or valueOf cannot
// answer the guard one thing and the built-in another. Built-in
// iterators step through JavaScript, so a spread or Array.from over a
// long sequence can be interrupted too. Deep native recursion that could
// exhaust the Go stack (and kill the process, which no recover stops)
// goes through those guards or the call-stack limit.
//
// What remains: toUpperCase and toLowerCase can make a string up to three
// times longer in one step (within the overshoot above). goja's TypeError
// for an object it cannot convert to a primitive (no usable
// Symbol.toPrimitive, toString or valueOf: a null prototype, RegExp match
// groups, methods returning objects) formats the Go object (%v) with the
// strings the object holds itself, a shared one once per property, four
// bytes a character when not ASCII: the message is replaced for the
// model, but making it is one native step neither the interrupt nor
// MaxMemory stops, so a few properties holding one long string make
// gigabytes, and the process can die of a fatal out-of-memory error
// (TestConversionErrorHoldsTheObjectsStrings). Only a change in goja can
// bound it; no Go function of this package converts a script value (the
// prelude hands them strings). A native built-in that runs long without
// allocating ignores the interrupt. Run then waits a grace period (2 s), closes the
// Host off and returns with the limit's error; the abandoned runtime keeps
// a CPU until the built-in returns, and then stops at its next
// instruction. The chief such built-in, a regular expression with
// catastrophic backtracking, returns within 30 s: goja's regexp2 engine
// has only a process-wide match timeout, which this package sets at init
// (regexp.go); a match that reaches it counts as no match. Run never returns
// while a Host call is in progress, and never calls the Host after it
// returned, so Host.Call must honour its context.
//
// # In a child process
//
// Process is a Runner that does what Catalog.Run does in a child process
// (the same binary, whose main calls ServeChild when IsChild), its Host
// calls, clock and random reads answered over the child's stdin and
// stdout by the Host in the caller's process: the outputs, errors and
// Host calls are the same (TestProcessRunMatchesInProcess). What it
// adds: the steps above that nothing in process bounds end the child
// only, under an address-space limit (RLIMIT_AS: 8 x MaxMemory + 256 MiB
// beyond the 1.3 GiB or so the Go runtime reserves at start; not under
// the race detector), with a memory error
// (TestProcessConversionOutOfMemory); MaxMemory measures the script's
// heap alone; a child stuck inside a built-in is killed; and the child
// holds none of the caller's environment. The child ignores SIGINT,
// SIGTERM and SIGHUP, the worker's shutdown signals, which Ctrl-C,
// systemd and a closed terminal send it too: the worker lets running scripts finish, and ends a child by
// closing its stdin or killing it. It costs a process start,
// about 10 ms an execution (BenchmarkProcessRun). The worker uses it.
//
// Runs share nothing (a fresh runtime each time, and prelude copies of
// the built-ins it relies on, so the code changing globals only affects
// itself); concurrent Runs are safe; a panic anywhere ends the execution
// with an error, never the process.
package codemode
