package codemode

import (
	"context"
	"strings"
	"testing"
)

// An error's "(at line L:C)" is the code's own column when the code was
// rewritten (its last expression made a return, an object spread or
// for-in operand guarded): "const c = 1;\n c = 2" said 2:10, the 8
// characters of "return (" too far, and an error after a spread was
// further by the guard's name. goja places a property read's error at the
// property.
func TestErrorLocationIsTheCodes(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, code, want string }{
		{"last expression on line 2", "const c = 1;\n c = 2", "(at line 2:2)"},
		{"last expression on line 1", "null.x", "(at line 1:6)"},
		{"after a spread on the same line", "const o = {...{a: 1}}; const p = {...o}; null.x", "(at line 1:47)"},
		{"inside a spread", "const o = {...null.x}", "(at line 1:20)"},
		{"no rewrite", "const a = 1;\n  throw new Error('x');", "(at line 2:9)"},
		{"a tool error", "const a = 1;\n  await tools.fails({msg: 'm'})", "(at line 2:"},
		{"unhandled rejection after a rewrite", "const o = {...{}}; tools.fails({msg: 'lost'}); 'end'", "(at line 1:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cat, h := echoTools()
			out := cat.Run(context.Background(), tt.code, h, Limits{})
			got := out.Text
			if out.Err != nil {
				got = out.Err.Error()
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("%q: want %q", got, tt.want)
			}
		})
	}
}
