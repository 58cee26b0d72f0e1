package main

import (
	"strings"
	"testing"
)

// TestDashIDAfterDoubleDash: job ids may start with a dash (the schema
// allows it; submit --id -x takes one), but "submit status -x" was refused
// as "unknown shorthand flag: 'x' in -x" and nothing said how to name the
// job. The refusal now says to give it after --, which works.
func TestDashIDAfterDoubleDash(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"status", "watch", "transcript", "cancel"} {
		t.Run(cmd, func(t *testing.T) {
			t.Parallel()
			res := submitCmd(t, "", cmd, "-dash-1")
			want := "a job id that starts with a dash goes after --: submit " + cmd + " -- -dash-1"
			if res.code != exitUsage || !strings.Contains(res.stderr, want) {
				t.Errorf("want exit 2 and %q, got %+v", want, res)
			}
		})
	}
	// A long flag given with one dash keeps its own hint.
	if res := submitCmd(t, "", "status", "-json", "x"); !strings.Contains(res.stderr, "a long flag takes two dashes: --json") {
		t.Errorf("-json: %+v", res)
	}
}
