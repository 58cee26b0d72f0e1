package codemode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// An execution in a child process gives what it gives in process: the
// same output, calls (in order, with their arguments), clock and random
// reads, and errors.
func TestProcessRunMatchesInProcess(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, code string
		lim        Limits
	}{
		{"value", `return 1 + 2`, Limits{}},
		{"console and value", "console.log('one', {two: 2}); console.warn('w'); 'done'", Limits{}},
		{"tool calls", `const a = await tools.echo({n: 1}); const b = await tools.structured({}); const c = await tools.plain({name: "é\n"}); [a, b, c]`, Limits{}},
		{"Promise.all", `(await Promise.all([1, 2, 3].map(n => tools.echo({n})))).map(r => r.args.n)`, Limits{}},
		{"tool error caught", `try { await tools.fails({msg: "no"}) } catch (e) { return e.name + ": " + e.message }`, Limits{}},
		{"tool error uncaught", "const x = 1;\nawait tools.fails({msg: 'rate limited'})", Limits{}},
		{"refusal", `try { await tools.refused({}) } catch (e) { return e.message }`, Limits{}},
		{"name that is no identifier", `(await tools["github-get_issue"]({number: 8})).title`, Limits{}},
		{"large numbers", `(await tools.echo({n: 12345678901234567890})).args`, Limits{}},
		{"clock and random", `[Date.now(), new Date().getTime(), Math.random(), Math.random()]`, Limits{}},
		{"syntax error", "const = 1", Limits{}},
		{"thrown", `throw new RangeError("out")`, Limits{}},
		{"unknown tool", `await tools.nope({})`, Limits{}},
		{"unhandled rejection", `Promise.reject(new Error("late")); 1`, Limits{}},
		{"tool-call limit", `for (let i = 0; i < 5; i++) await tools.echo({i})`, Limits{MaxCalls: 2}},
		{"values limit", `while (true) Date.now()`, Limits{MaxValues: 50}},
		{"output cut", `for (let i = 0; i < 100; i++) console.log("line " + i); "end"`, Limits{MaxOutput: 200}},
		{"code size", `1 + 1 // ` + strings.Repeat("x", 200), Limits{MaxCode: 100}},
		{"call stack", `const f = n => f(n + 1) + 1; f(0)`, Limits{MaxStackDepth: 50}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cat, inH := echoTools()
			in := cat.Run(context.Background(), tt.code, inH, tt.lim)
			_, procH := echoTools()
			got := Process{}.Run(context.Background(), cat, tt.code, procH, tt.lim)
			if got.Text != in.Text || got.Calls != in.Calls || errText(got.Err) != errText(in.Err) {
				t.Errorf("in a child: Text %q, Calls %d, Err %v\nin process: Text %q, Calls %d, Err %v",
					got.Text, got.Calls, got.Err, in.Text, in.Calls, in.Err)
			}
			var le, inLE *LimitError
			if errors.As(in.Err, &inLE) && (!errors.As(got.Err, &le) || le.Limit != inLE.Limit) {
				t.Errorf("Err = %#v, want a *LimitError of %q", got.Err, inLE.Limit)
			}
			if !reflect.DeepEqual(procH.calls, inH.calls) || !reflect.DeepEqual(procH.nows, inH.nows) || !reflect.DeepEqual(procH.rands, inH.rands) {
				t.Errorf("host saw calls %v, clock %v, random %v; in process %v, %v, %v",
					procH.calls, procH.nows, procH.rands, inH.calls, inH.nows, inH.rands)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// What the Host does to an execution in a child, it does as in process:
// an Abort ends it with the Host's error (errors.Is), a panic is an
// Abort, an explanation reaches the code, and a cancelled context ends
// a call in progress and the execution.
func TestProcessHostOutcomes(t *testing.T) {
	t.Parallel()
	t.Run("abort", func(t *testing.T) {
		t.Parallel()
		cat, h := echoTools()
		h.tools["refused"] = func(map[string]any) (Result, error) { return Result{}, Abort(errJournal) }
		out := Process{}.Run(context.Background(), cat, "try { await tools.refused({}) } catch (e) { console.log('caught') }\nawait tools.echo({})", h, Limits{})
		if !errors.Is(out.Err, errJournal) || strings.Contains(out.Text, "caught") || out.Calls != 1 {
			t.Fatalf("Err = %v, Text %q, Calls %d; want the abort cause, nothing caught, one call", out.Err, out.Text, out.Calls)
		}
	})
	t.Run("panic in a call", func(t *testing.T) {
		t.Parallel()
		cat, h := echoTools()
		h.tools["echo"] = func(map[string]any) (Result, error) { panic("boom") }
		out := Process{}.Run(context.Background(), cat, "try { await tools.echo({}) } catch (e) { console.log('caught') }", h, Limits{})
		if out.Err == nil || !strings.Contains(out.Err.Error(), "failed inside the host: boom") || strings.Contains(out.Text, "caught") {
			t.Fatalf("Err = %v, Text %q", out.Err, out.Text)
		}
	})
	t.Run("panic reading the clock", func(t *testing.T) {
		t.Parallel()
		cat, h := echoTools()
		h.now = func(int) int64 { panic("no clock") }
		out := Process{}.Run(context.Background(), cat, "try { Date.now() } catch (e) { console.log('caught') }\n1", h, Limits{})
		var ab *abortError
		if !errors.As(out.Err, &ab) || !strings.Contains(out.Err.Error(), "clock read 0 failed inside the host: no clock") {
			t.Fatalf("Err = %v, want the clock's abort", out.Err)
		}
	})
	t.Run("explained", func(t *testing.T) {
		t.Parallel()
		cat, fh := echoTools()
		h := explainHost{fh, map[string]string{"read_file": "its server is down"}}
		out := Process{}.Run(context.Background(), cat, `tools.read_file`, h, Limits{})
		if out.Err == nil || !strings.Contains(out.Err.Error(), "tools.read_file is not a tool of this job: its server is down") {
			t.Fatalf("Err = %v", out.Err)
		}
	})
	t.Run("cancelled during a call", func(t *testing.T) {
		t.Parallel()
		cat := NewCatalog([]Tool{{Name: "slow"}})
		ctx, cancel := context.WithCancel(context.Background())
		out := Process{}.Run(ctx, cat, `await tools.slow({})`, ctxHost{started: cancel}, Limits{})
		// The code may see the call's refusal before the cancellation
		// stops it (as in process): either way the error is a cancellation.
		if !errors.Is(out.Err, context.Canceled) {
			t.Fatalf("Err = %v, want a cancellation", out.Err)
		}
	})
	t.Run("wall time during a call", func(t *testing.T) {
		t.Parallel()
		cat := NewCatalog([]Tool{{Name: "slow"}})
		// The call lasts until its context is done: the child's wall
		// time must reach the call in this process.
		out := Process{}.Run(context.Background(), cat, `await tools.slow({})`, ctxHost{}, Limits{WallTime: 200 * time.Millisecond})
		var le *LimitError
		if !errors.As(out.Err, &le) || le.Limit != "wall time" || !strings.Contains(le.Message, `while tool "slow" was running`) {
			t.Fatalf("Err = %v, want the wall time limit during the call", out.Err)
		}
	})
}

// A child that cannot start, or ends without answering, is an error of
// the execution, never of the caller.
func TestProcessChildFailures(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cat, h := echoTools()
	for _, tt := range []struct {
		name string
		p    Process
		want string
	}{
		{"no such program", Process{Path: "/nonexistent/jetagent"}, "cannot start the code's process /nonexistent/jetagent"},
		// A binary that is no child: it ends at once, with no answer.
		{"not a child", Process{Path: "/bin/sh", Args: []string{"-c", "echo not here >&2"}}, "the code's process ended without a result (exit status 0): not here"},
		{"exits", Process{Path: "/bin/sh", Args: []string{"-c", "echo 'fatal error: something' >&2; exit 2"}}, "ended without a result (exit status 2): fatal error: something"},
		// The Go runtime's words for an allocation the address-space
		// limit refused depend on the allocation: each is the memory limit.
		{"out of memory", Process{Path: "/bin/sh", Args: []string{"-c", "echo 'fatal error: out of memory' >&2; exit 2"}}, "the code's process ran out of memory (its limit is 2304 MiB; fatal error: out of memory)"},
		{"cannot allocate memory", Process{Path: "/bin/sh", Args: []string{"-c", "echo 'fatal error: runtime: cannot allocate memory' >&2; exit 2"}}, "the code's process ran out of memory (its limit is 2304 MiB; fatal error: runtime: cannot allocate memory)"},
		// SIGKILL: most often the kernel's OOM killer, but not always.
		{"killed", Process{Path: "/bin/sh", Args: []string{"-c", "kill -9 $$"}}, "the code's process was killed (SIGKILL), most often by the system's out-of-memory killer"},
		{"writes what is not JSON", Process{Path: "/bin/sh", Args: []string{"-c", "echo hello; cat >/dev/null"}}, "a message of the code's process is not JSON"},
		{"the test binary itself", Process{Path: self}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := tt.p.Run(context.Background(), cat, `await tools.echo({a: 1})`, h, Limits{})
			if tt.want == "" {
				if out.Err != nil || out.Text != `{"args":{"a":1}}` {
					t.Fatalf("Text %q, Err %v", out.Text, out.Err)
				}
				return
			}
			if out.Err == nil || !strings.Contains(out.Err.Error(), tt.want) {
				t.Fatalf("Err = %v, want it to say %q", out.Err, tt.want)
			}
		})
	}
}

// The step goja cannot bound (TestConversionErrorHoldsTheObjectsStrings)
// ends the child, not this process: 256 properties holding one string of
// 8 Mi characters make a message of 2 GiB, over the child's address space
// of 8 x 64 MiB + 256 MiB. In process it took the test binary down
// under ulimit -v.
func TestProcessConversionOutOfMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("under the race detector the child has no address-space limit (its shadow memory); `go test -run TestProcessConversionOutOfMemory ./internal/codemode` runs it")
	}
	t.Parallel()
	cat, h := echoTools()
	// The string is small beside MaxMemory, so that the watchdog cannot
	// stop the script before the conversion (32 Mi characters could).
	code := `const s = "x".repeat(8 << 20), o = Object.create(null);
for (let i = 0; i < 256; i++) o["k" + i] = s;
try { "" + o } catch (e) { console.log("caught") }
"survived"`
	// A grace long enough that the child's watchdog does not abandon the
	// stuck conversion (and report that) before it reaches the limit.
	out := Process{}.Run(context.Background(), cat, code, h, Limits{MaxMemory: 64 << 20, grace: time.Minute})
	var le *LimitError
	if !errors.As(out.Err, &le) || le.Limit != "memory" || !strings.Contains(le.Message, "the code's process ran out of memory (its limit is 768 MiB") {
		t.Fatalf("Err = %v, Text %q: want the child's memory limit", out.Err, out.Text)
	}
}

// BenchmarkProcessRun is the cost of an execution in a child against in
// process: a short script with three tool calls.
func BenchmarkProcessRun(b *testing.B) {
	cat, h := echoTools()
	code := `const a = await tools.echo({n: 1}); const b = await tools.plain({name: "x"}); const c = await tools.structured({}); [a.args.n, b, c.n]`
	for _, r := range []struct {
		name string
		run  func() Output
	}{
		{"in_process", func() Output { return cat.Run(context.Background(), code, h, Limits{}) }},
		{"child_process", func() Output { return Process{}.Run(context.Background(), cat, code, h, Limits{}) }},
	} {
		b.Run(r.name, func(b *testing.B) {
			for b.Loop() {
				if out := r.run(); out.Err != nil {
					b.Fatal(out.Err)
				}
			}
		})
	}
}

// removedSelfEnv makes the test binary remove its own file, then run an
// execution in a child and print its output (TestProcessAfterTheBinaryIsGone).
const removedSelfEnv = "JETAGENT_CODEMODE_TEST_REMOVED_SELF"

func runRemovedSelf() int {
	if err := os.Remove(os.Args[0]); err != nil {
		fmt.Println(err)
		return 1
	}
	cat, h := echoTools()
	out := Process{}.Run(context.Background(), cat, `(await tools.echo({a: 1})).args.a + 1`, h, Limits{})
	fmt.Print(out.Text, " ", out.Err)
	return 0
}

// A worker whose binary was replaced or removed on disk (an upgrade in
// place) still runs code: the child is the running binary itself, not
// the file at its path, which may be another version or none.
func TestProcessAfterTheBinaryIsGone(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("/proc/self/exe is Linux's")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), "codemode.test")
	if err := os.WriteFile(cp, b, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cp, "-test.run=^$")
	cmd.Env = append(os.Environ(), removedSelfEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "2 <nil>" {
		t.Fatalf("output %q (%v), want the execution's value", out, err)
	}
}

// Check tells a worker at start whether it can run code in a child: with
// this binary it can; a path that cannot be executed (as in a container
// that forbids it) or a binary that does not serve the child says why.
func TestProcessCheck(t *testing.T) {
	t.Parallel()
	notExec := filepath.Join(t.TempDir(), "worker")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		p    Process
		want []string // in the error; none: no error
	}{
		{"this binary", Process{}, nil},
		{"not executable", Process{Path: notExec}, []string{"cannot start the code's process", "permission denied"}},
		{"not a worker", Process{Path: "/bin/true"}, []string{"code"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			err := tc.p.Check(ctx)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Check passed")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check: %v; want %q in it", err, w)
				}
			}
		})
	}
}
