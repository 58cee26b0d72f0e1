package codemode

import (
	"context"
	"testing"
	"time"

	"github.com/dlclark/regexp2/v2"
)

// TestRegexpMatchBound: a catastrophic regular expression (2^40 steps;
// the lookahead makes goja use regexp2 rather than Go's linear regexp)
// ends at regexp2's match bound, which the sandbox sets, instead of
// keeping a CPU for ever after Run abandoned the runtime. Not parallel:
// the bound is process-wide and read when an expression is compiled, so
// it is shortened here while no other test runs code (parallel tests wait
// for the sequential ones).
func TestRegexpMatchBound(t *testing.T) {
	if got := regexp2.DefaultMatchTimeout; got != regexpMatchBound {
		t.Fatalf("regexp2.DefaultMatchTimeout = %v, want %v", got, regexpMatchBound)
	}
	regexp2.DefaultMatchTimeout = 200 * time.Millisecond
	t.Cleanup(func() { regexp2.DefaultMatchTimeout = regexpMatchBound })
	cat, h := echoTools()
	start := time.Now()
	out := cat.Run(context.Background(), "/(?=a)(a+)+$/.test('a'.repeat(40) + '!')", h, Limits{WallTime: time.Minute})
	if out.Err != nil || out.Text != "false" {
		t.Fatalf("Run = %q, %v", out.Text, out.Err)
	}
	// Seconds at most (the bound, slowed by -race and load), not 2^40 steps.
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the match took %v", d)
	}
}
