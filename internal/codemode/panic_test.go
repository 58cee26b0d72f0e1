package codemode

import (
	"context"
	"strings"
	"testing"

	"github.com/dop251/goja"
)

// TestNativePanicEndsTheExecution guards the recover of the runtime's
// goroutine (session.exec): a Go panic under the code (a native, here one
// a test adds; in production a built-in's or the prelude's helpers') ends
// that execution with an internal error quoting the panic's value; the
// code cannot catch it, and the process lives. Synchronously, after an
// await (in a promise job) and inside a tool call's continuation.
func TestNativePanicEndsTheExecution(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, code string }{
		{"sync", `try { crash() } catch (e) { console.log("caught") }`},
		{"after await", `await Promise.resolve(); try { crash() } catch (e) { console.log("caught") }`},
		{"in a then", `await tools.echo({}).then(() => crash()).catch(() => console.log("caught"))`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cat, h := echoTools()
			lim := Limits{}
			lim.hook = func(vm *goja.Runtime) {
				_ = vm.Set("crash", func() {
					var m map[string]int
					m["x"]++ //nolint:staticcheck // a nil map on purpose: a real runtime panic
				})
			}
			out := cat.Run(context.Background(), tc.code, h, lim)
			if out.Err == nil || !strings.Contains(out.Err.Error(), "internal error in code mode: assignment to entry in nil map") {
				t.Fatalf("Err = %v, Text %q", out.Err, out.Text)
			}
			if strings.Contains(out.Text, "caught") {
				t.Errorf("the code caught a Go panic: %q", out.Text)
			}
		})
	}
}
