package codemode

import (
	"context"
	"strings"
	"testing"
)

// Output.Text is at most MaxOutput bytes whatever the limit: under about
// 160 bytes the markers saying what was cut (one for the console lines,
// one for the final value) made it longer than the limit (154 bytes at a
// limit of 1).
func TestOutputNeverOverTheLimit(t *testing.T) {
	t.Parallel()
	codes := []string{
		`console.log("x".repeat(50)); "y".repeat(50)`,
		`for (let i = 0; i < 100; i++) console.log("line " + i); "v".repeat(300)`,
		`for (let i = 0; i < 100; i++) console.log("line " + i)`,
		`"v".repeat(1000)`,
		`console.log("é".repeat(100)); "é".repeat(100)`,
		`console.log("abc".repeat(30)); throw new Error("x")`,
	}
	for _, code := range codes {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			cat, h := echoTools()
			whole := cat.Run(context.Background(), code, h, Limits{}).Text
			for _, limit := range []int{1, 2, 17, 18, 19, 20, 40, 99, 100, 150, 159, 160, 161, 200, 256} {
				out := cat.Run(context.Background(), code, h, Limits{MaxOutput: limit})
				if len(out.Text) > limit {
					t.Fatalf("limit %d: %d bytes: %q", limit, len(out.Text), out.Text)
				}
				if len(whole) <= limit {
					if out.Text != whole {
						t.Fatalf("limit %d: %q, want %q", limit, out.Text, whole)
					}
					continue
				}
				if !strings.HasPrefix(out.Text, "[output truncated") && !strings.Contains(out.Text, "\n[output truncated") && limit > len(shortMark) {
					t.Fatalf("limit %d: no marker: %q", limit, out.Text)
				}
				if !strings.HasPrefix(shortMark, out.Text) && limit <= len(shortMark) {
					t.Fatalf("limit %d: %q is not the marker's start", limit, out.Text)
				}
			}
		})
	}
}
