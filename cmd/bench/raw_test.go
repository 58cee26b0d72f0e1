package main

import (
	"strings"
	"testing"
)

// TestRawConsumeNoWait: the pull-consume rows measure consuming, not the
// fetch's wait for a batch of 100 that never fills: a last batch asked
// for more than was left waited out FetchMaxWait (5 s), so with -raw 200
// the row after the sync publish said 10 msgs/s.
func TestRawConsumeNoWait(t *testing.T) {
	t.Parallel()
	for _, n := range []int{4, 150} {
		rows, err := measureRaw(t.Context(), t.TempDir(), n)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		for _, r := range rows {
			if !strings.HasPrefix(r.Op, "pull-consume") {
				continue
			}
			// Well under the 5 s the fetch waits for a batch to fill.
			if secs := float64(r.Msgs) / r.PerSecond; secs > 2.5 {
				t.Errorf("n=%d: %q: %d msgs took %.1fs", n, r.Op, r.Msgs, secs)
			}
		}
	}
}
