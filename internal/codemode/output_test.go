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

// A console line of exactly the room left is kept whole (its newline is
// not part of the output): it came back as a marker counting it as cut.
// The marker counts every line not shown or cut.
func TestOutputAtExactlyTheLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, code string
		limit      int
		want       string
	}{
		{"a line of the limit", `console.log("0123456789")`, 10, "0123456789"},
		{"two lines filling the limit", `console.log("0123"); console.log("56789")`, 10, "0123\n56789"},
		{"a line and a value filling the limit", `console.log("0123"); "56789"`, 10, "0123\n56789"},
		{"a value of the limit", `"0123456789"`, 10, "0123456789"},
		{"one line over", `console.log("0123456789a")`, 100, "0123456789a"},
		{"lines after a full output are counted", "console.log(\"x\".repeat(40)); for (let i = 0; i < 3; i++) console.log(\"y\".repeat(40))", 100,
			strings.Repeat("x", 16) + "\n[output truncated: 4 console lines not shown or cut; the output limit is 100 bytes]"},
		{"a line cut counts once", "console.log(\"a\".repeat(10)); console.log(\"b\".repeat(120))", 120,
			strings.Repeat("a", 10) + "\n" + strings.Repeat("b", 25) + "\n[output truncated: 1 console lines not shown or cut; the output limit is 120 bytes]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cat, h := echoTools()
			out := cat.Run(context.Background(), tt.code, h, Limits{MaxOutput: tt.limit})
			if out.Err != nil || out.Text != tt.want {
				t.Fatalf("Text %q (Err %v), want %q", out.Text, out.Err, tt.want)
			}
		})
	}
}
