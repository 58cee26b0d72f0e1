package codemode

import (
	"context"
	"testing"
)

// BenchmarkRun is the cost of one execution: a fresh runtime, the prelude,
// a small script with three tool calls.
func BenchmarkRun(b *testing.B) {
	cat, h := echoTools()
	code := "const a = await tools.echo({n: 1});\n" +
		"const [x, y] = await Promise.all([tools.plain({name: 'b'}), tools.structured({})]);\n" +
		"console.log(a.args.n, x, y.n);\n" +
		"return {ok: true}"
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		h.calls = h.calls[:0]
		out := cat.Run(ctx, code, h, Limits{})
		if out.Err != nil || out.Calls != 3 {
			b.Fatal(out.Err, out.Calls)
		}
	}
}
