package childtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// maxOutput bounds how much of a failed child's output is quoted.
const maxOutput = 4000

// InChild runs the calling test in a child process of the test binary
// and returns false, having failed the test with the child's output (its
// panic first) if the child failed. In the child, where the environment
// variable env names the test, it returns true and the body runs there.
//
//	if !childtest.InChild(t, "PKG_PANIC_CHILD") {
//		return
//	}
func InChild(t *testing.T, env string) bool {
	t.Helper()
	if os.Getenv(env) == t.Name() {
		return true
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		text := string(out)
		if i := strings.Index(text, "\npanic: "); i >= 0 {
			text = text[i+1:] // the process died: its panic first
		} else if i := strings.Index(text, "--- FAIL"); i >= 0 {
			text = text[i:]
		}
		if len(text) > maxOutput {
			text = text[:maxOutput] + "..."
		}
		t.Fatalf("the test process failed (%v):\n%s", err, text)
	}
	return false
}
