package codemode

import (
	"context"
	"testing"
)

// The rewrites (last expression to return, spread and for-in operands
// through the guard) keep the meaning of the code.
func TestRewritesKeepMeaning(t *testing.T) {
	t.Parallel()
	tests := []struct{ code, want string }{
		{"let a, rest; ({a, ...rest} = {a: 1, b: 2}); [a, rest]", `[1,{"b":2}]`},
		{"const f = ({...r}) => r; f({x: 1})", `{"x":1}`},
		{"const o = {...(1 > 0 ? {a: 1} : {b: 2}), ...[1, 2], ...'ab', ...null}; o", `{"0":"a","1":"b","a":1}`},
		{"for (var k in {a: 1}, {b: 2}) console.log(k)", "b"},
		{"for (const [k] in {ab: 1}) console.log(k)", "a"},
		{"const x = {...{...{y: 1}}}; x", `{"y":1}`},
		{"({...await tools.echo({})}).args", "{}"},
		{"`template ${1 + 1}`", "template 2"},
		{"/re/g.source", "re"},
		{"x => x", "[Function (anonymous)]"},
		{"(function () { return 1 })()", "1"},
		{"label: for (;;) break label", ""},
		{"class A {}; A.name", "A"},
		{"a = 1, b = 2", "2"},
		{"void 0", ""},
		{"1\n// trailing comment", "1"},
		{"1 /* block */", "1"},
		{"(1, 2)", "2"},
		{"((((3))))", "3"},
		{"!function(){}() ", "true"},
		{"-(5)", "-5"},
		{"if (true) { 5 }", ""},
		{"return 1;\n2", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			t.Parallel()
			cat, h := echoTools()
			out := cat.Run(context.Background(), tt.code, h, Limits{})
			if out.Err != nil || out.Text != tt.want {
				t.Errorf("Text = %q, Err = %v; want %q", out.Text, out.Err, tt.want)
			}
		})
	}
}
