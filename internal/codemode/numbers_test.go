package codemode

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// A number of a tool's result that a JavaScript number cannot hold comes
// as a string of its exact digits: an integer beyond ±(2^53-1) (IDs) was
// rounded to another integer without a word, and one beyond float64's
// range (1e400) failed the whole result with Go's "json: cannot unmarshal
// number 1e400 into Go value of type float64". The code's own JSON.parse
// gives ±Infinity for those, as JavaScript does.
func TestNumbersJavaScriptCannotHold(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		structured string // the tool's structured content, else text
		text       string
		code       string
		want       string
		wantErr    string
	}{
		{name: "30-digit integer is exact", structured: `{"id":123456789012345678901234567890}`,
			code: `const r = await tools.t({}); [typeof r.id, r.id]`, want: `["string","123456789012345678901234567890"]`},
		{name: "beyond float64's range", structured: `{"a":1e400,"b":-1e400,"c":1E+999}`,
			code: `await tools.t({})`, want: `{"a":"1e400","b":"-1e400","c":"1E+999"}`},
		{name: "a 400-digit integer", structured: `[1` + strings.Repeat("0", 400) + `]`, code: `(await tools.t({}))[0].length`, want: "401"},
		{name: "non-zero underflowing to 0", structured: `[1e-400,-2.5e-999,0e-400,0.0,-0]`, code: `await tools.t({})`, want: `["1e-400","-2.5e-999",0,0,0]`},
		{name: "the safe integers stay numbers", structured: `[9007199254740991,-9007199254740991,9007199254740992,-9007199254740993,12345678901234567]`,
			code: `(await tools.t({})).map(x => typeof x)`, want: `["number","number","string","string","string"]`},
		{name: "fractions and exponents in range stay numbers", structured: `[0.1,1.5e300,12345678901234567890.5,1e-300]`,
			code: `(await tools.t({})).map(x => typeof x)`, want: `["number","number","number","number"]`},
		{name: "JSON text too", text: `{"id":98765432109876543210,"n":[1,2]}`, code: `await tools.t({})`, want: `{"id":"98765432109876543210","n":[1,2]}`},
		{name: "a bare number text", text: `123456789012345678901234567890`, code: `const r = await tools.t({}); typeof r + " " + r`, want: "string 123456789012345678901234567890"},
		{name: "strings are left alone", structured: `{"s":"x\"1e400 123456789012345678901234567890\\","k":"-1"}`, code: `await tools.t({})`,
			want: `{"s":"x\"1e400 123456789012345678901234567890\\","k":"-1"}`},
		{name: "JSON.parse gives Infinity", code: `const v = JSON.parse('{"a":[1e400,-1e400],"b":"\\u0000codemode-infinity+"}'); [v.a[0] === Infinity, v.a[1] === -Infinity, v.b.length]`,
			want: "[true,true,19]"},
		{name: "JSON.parse's reviver sees Infinity", code: `const seen = []; JSON.parse('[1e400,2]', function (k, v) { if (k !== "") seen.push(String(v), String(this[k])); return v }); seen`,
			want: `["Infinity","Infinity","2","2"]`},
		{name: "JSON.parse of a bare 1e400", code: `JSON.parse("-1e400") === -Infinity`, want: "true"},
		{name: "JSON.parse of a __proto__ key", code: `const v = JSON.parse('{"__proto__":1e400}'); [Object.getPrototypeOf(v) === Object.prototype, Object.getOwnPropertyDescriptor(v, "__proto__").value]`,
			want: `[true,null]`},
		{name: "invalid JSON still throws", code: `JSON.parse("[1e400")`, wantErr: "SyntaxError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cat := NewCatalog([]Tool{{Name: "t"}})
			h := &fakeHost{tools: map[string]func(map[string]any) (Result, error){
				"t": func(map[string]any) (Result, error) {
					return Result{Text: tt.text, Structured: json.RawMessage(tt.structured)}, nil
				},
			}}
			out := cat.Run(context.Background(), tt.code, h, Limits{})
			if tt.wantErr != "" {
				if out.Err == nil || !strings.Contains(out.Err.Error(), tt.wantErr) {
					t.Fatalf("Err = %v, want %q", out.Err, tt.wantErr)
				}
				return
			}
			if out.Err != nil || out.Text != tt.want {
				t.Fatalf("got %q (Err %v), want %q", out.Text, out.Err, tt.want)
			}
		})
	}
}

// A tool result over the JSON guards' limits (nesting, values) named
// JSON.parse, which the code did not call, and not the tool: it now says
// which tool's result and what to do, as a RangeError carrying .tool.
func TestToolResultOverTheLimits(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, structured, want string }{
		{"nested too deep", strings.Repeat("[", 1200) + strings.Repeat("]", 1200), "JSON.parse: text nested deeper than 1000 levels"},
		{"too many values", "[" + strings.Repeat("1,", 30000) + "1]", "JSON.parse: the text: 30001 values is over the code-mode limit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cat := NewCatalog([]Tool{{Name: "t"}})
			h := &fakeHost{tools: map[string]func(map[string]any) (Result, error){
				"t": func(map[string]any) (Result, error) { return Result{Structured: json.RawMessage(tt.structured)}, nil },
			}}
			out := cat.Run(context.Background(), `try { await tools.t({}) } catch (e) { console.log(e.name, e.tool); throw e }`, h, Limits{guardMemory: 1 << 20})
			want := "Uncaught RangeError: the result of tools.t is too large for code mode (RangeError: " + tt.want
			if out.Err == nil || !strings.Contains(out.Err.Error(), want) || !strings.Contains(out.Err.Error(), "ask the tool for less") || out.Text != "RangeError t" {
				t.Fatalf("Err = %v, text %q; want %q", out.Err, out.Text, want)
			}
		})
	}
}
