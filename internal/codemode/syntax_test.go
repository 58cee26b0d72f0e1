package codemode

import (
	"context"
	"strings"
	"testing"
)

// What goja does not parse or compile says so and what to write instead,
// at the code's own line and column: for await was "Unexpected token
// await" alone (the code runs in an async function, so the model took it
// for a misplaced await), and a compile-time error named code.js and a
// column of the wrapped source ("Async generators are not supported yet
// at code.js:1:15").
func TestUnsupportedSyntaxSaysWhatToWrite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		code string
		want []string
		not  []string
	}{
		{"top-level for await", "const xs = [tools.echo({})];\nfor await (const x of xs) console.log(x)",
			[]string{"SyntaxError: Line 2:5 Unexpected token await", "for await is not available in code mode", "for (const x of await Promise.all(promises))"}, nil},
		{"for await in an async function", "async function f(xs) {\n  for await (const x of xs) {}\n}\nawait f([])",
			[]string{"Line 2:7", "for await is not available"}, nil},
		{"async generator", "const a = 1;\nasync function* g() { yield 1 }",
			[]string{"SyntaxError: Line 2:1 Async generators are not supported yet (async generators, async function*, are not available in code mode"}, []string{"code.js"}},
		{"async generator on line 1", "async function* g() {}", []string{"SyntaxError: Line 1:1 Async generators"}, []string{"code.js"}},
		{"redeclaration", "let a = 1;\nlet a = 2;", []string{"SyntaxError: Line 2:5 Identifier 'a' has already been declared"}, []string{"code.js"}},
		{"another syntax error", "const forawait = ;", []string{"SyntaxError: Line 1:18"}, []string{"for await"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cat, h := echoTools()
			out := cat.Run(context.Background(), tt.code, h, Limits{})
			if out.Err == nil {
				t.Fatalf("no error (text %q)", out.Text)
			}
			msg := out.Err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("Err = %q, want it to contain %q", msg, w)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(msg, n) {
					t.Errorf("Err = %q, want no %q", msg, n)
				}
			}
		})
	}
}
