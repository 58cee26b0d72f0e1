package codemode

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
)

// resultHost answers every call with res and records the arguments.
type resultHost struct {
	res  Result
	args []string
}

func (h *resultHost) Call(_ context.Context, _ int, _ string, args json.RawMessage) (Result, error) {
	h.args = append(h.args, string(args))
	return h.res, nil
}
func (h *resultHost) Now(int) int64      { return 0 }
func (h *resultHost) Random(int) float64 { return 0 }

// What crosses the child's wire arrives as it would in process: a call's
// arguments byte for byte (encoding/json escaped <, >, & and U+2028/9 in
// them, so the tool.call events, the journal and the reflected transcript
// of a script passing a URL with a query or an HTML snippet showed
// \u0026 and \u003c), and a result whose structured content is no JSON
// as its text (the encoding failed: the call threw "could not be passed
// to the code").
func TestProcessWireKeepsBytes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, code string
		res        Result
	}{
		{"html in args", `await tools.t({url: "https://x/?a=1&b=<2>"}); 1`, Result{Text: "ok"}},
		{"line separators in args", "await tools.t({q: \"a\\u2028b\\u2029c\\u0000\"}); 1", Result{Text: "ok"}},
		{"lone surrogates in args", `await tools.t({q: "a\ud800b\udc00"}); 1`, Result{Text: "ok"}},
		{"odd text", `const r = await tools.t({}); [r.length, r]`, Result{Text: "a\x00b\u2028<&>"}},
		{"html in structured", `JSON.stringify(await tools.t({}))`, Result{Structured: json.RawMessage(`{"a":"<&>","b":"\u2028"}`)}},
		{"structured not JSON", `await tools.t({})`, Result{Text: "the text", Structured: json.RawMessage(`{bad`)}},
		{"structured empty", `await tools.t({})`, Result{Text: "the text", Structured: json.RawMessage{}}},
		{"structured blank", `await tools.t({})`, Result{Text: "the text", Structured: json.RawMessage(" \n")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cat := NewCatalog([]Tool{{Name: "t"}})
			inH, procH := &resultHost{res: tt.res}, &resultHost{res: tt.res}
			in := cat.Run(context.Background(), tt.code, inH, Limits{})
			got := Process{}.Run(context.Background(), cat, tt.code, procH, Limits{})
			if got.Text != in.Text || errText(got.Err) != errText(in.Err) || !reflect.DeepEqual(procH.args, inH.args) {
				t.Errorf("in a child: Text %q, Err %v, args %q\nin process: Text %q, Err %v, args %q",
					got.Text, got.Err, procH.args, in.Text, in.Err, inH.args)
			}
		})
	}
}
