package main

import (
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/jobs"
)

// TestGlobNotes: without MCP servers a job's globs are checked against its
// client tools; globs that match say nothing.
func TestGlobNotes(t *testing.T) {
	t.Parallel()
	notes := jobNotes(agentloop.Config{}.WithDefaults(), nil)
	tests := []struct {
		job  jobs.Job
		want string
	}{
		{jobs.Job{Task: "t"}, ""},
		{jobs.Job{Task: "t", Allow: []string{"open_*", "lookup"}, ClientTools: []clienttools.Decl{{Name: "open_door"}, {Name: "look_up"}}},
			`allow "lookup" matches no tool of the job (did you mean "look_up"?)`},
		{jobs.Job{Task: "t", Deny: []string{"*"}}, `deny "*" matches no tool of the job`},
	}
	for _, tt := range tests {
		if got := strings.Join(notes(&tt.job), "; "); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.job, got, tt.want)
		}
	}
}
