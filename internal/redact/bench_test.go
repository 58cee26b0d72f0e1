package redact_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/redact"
)

// hostileURLs are long inputs shaped to hit the worst case of each part
// of URL, Secrets and Text: many '@' and ':' (userinfo), many labels,
// segments and parameters, one long run of key-looking characters.
func hostileURLs(n int) map[string]string {
	rep := func(s string) string { return strings.Repeat(s, n/len(s)+1)[:n] }
	return map[string]string{
		"at-signs":     "https://" + rep("u:p@") + "/x",
		"colons":       "https://" + rep("a:") + "/" + rep("@"),
		"labels":       "https://" + rep("a1b2c3d4e5f6g7h8i9j0.") + "com/",
		"segments":     "https://host/" + rep("sk-abc123def456/"),
		"params":       "https://host/x?" + rep("token=abcd&"),
		"frag-params":  "https://host/x#" + rep("k=v;"),
		"one-run":      "https://host/" + rep("aB3-"),
		"dashes":       "https://host/" + rep("-_"),
		"percent":      "https://host/" + rep("%2") + "?" + rep("%%=") + "#" + rep("%"),
		"no-structure": rep("x"),
	}
}

// TestLongInputs: hostile inputs of a few megabytes come back (a
// quadratic pass over them would not finish within the test's timeout),
// with no secret shown.
func TestLongInputs(t *testing.T) {
	t.Parallel()
	for name, raw := range hostileURLs(1 << 20) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			redact.URL(raw)
			secrets := redact.Secrets(raw)
			text := redact.Text("error: "+raw, secrets)
			for _, sec := range secrets {
				if strings.Contains(text, sec) {
					t.Fatalf("Text shows a secret of %d bytes", len(sec))
				}
			}
		})
	}
}

// BenchmarkURL shows the cost per byte staying flat as inputs grow
// (go test -bench . ./internal/redact): a regression to quadratic time
// shows as ns/op growing 100 times for 10 times the size.
func BenchmarkURL(b *testing.B) {
	for _, n := range []int{1 << 10, 1 << 14, 1 << 18} {
		for name, raw := range hostileURLs(n) {
			b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
				b.SetBytes(int64(len(raw)))
				for b.Loop() {
					redact.Text(redact.URL(raw), redact.Secrets(raw))
				}
			})
		}
	}
}
