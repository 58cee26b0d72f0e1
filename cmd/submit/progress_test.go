package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/jobs"
)

// TestProgressBarShowsFailures: on a terminal the bar counts, and each
// failure is printed above it with its reason, not only counted.
func TestProgressBarShowsFailures(t *testing.T) {
	t.Parallel()
	var w bytes.Buffer
	p := newProgress(&w, 3, true, false)
	p.done(batchResult{Line: 1, Result: &jobs.Result{ID: "a", Status: jobs.StatusSucceeded}})
	p.done(batchResult{Line: 2, Result: &jobs.Result{ID: "b", Status: jobs.StatusDead, Error: "job names an MCP server this worker does not configure: \"x\""}})
	p.done(batchResult{Line: 3, Result: &jobs.Result{ID: "line-3", Status: jobs.StatusFailed, Error: "want a JSON object"}})
	p.finish()
	out := w.String()
	for _, want := range []string{
		`line 2: b dead: job names an MCP server this worker does not configure: "x"`,
		"line 3: failed: want a JSON object",
		"1 ok, 2 failed", "(3/3)",
		"3 jobs: 1 succeeded, 2 did not",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%q", want, out)
		}
	}
	if strings.Contains(out, "line 1:") {
		t.Errorf("a success is printed as a line:\n%q", out)
	}
}
