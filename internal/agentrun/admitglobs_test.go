package agentrun_test

import (
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentrun"
	"github.com/jetagent/jetagent/internal/jobs"
)

// A malformed allow or deny glob was checked only when the job's view of
// the MCP servers was made: on a worker without servers the job ran (and
// succeeded) with a glob that means nothing, on one with servers it
// failed once running. Admit now refuses it at the door, so the job is
// dead-lettered with the reason wherever it lands.
func TestAdmitRefusesBadGlobs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		allow, deny []string
		want        string // "" means admitted
	}{
		{"none", nil, nil, ""},
		{"good globs", []string{"get_*", "read_file"}, []string{"*delete*"}, ""},
		{"bad allow", []string{"get_*", "["}, nil, `allow[1]: bad glob "["`},
		{"bad deny", nil, []string{`a\`}, `deny[0]: bad glob "a\\"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := agentrun.Admit(&jobs.Job{Task: "x", Allow: tt.allow, Deny: tt.deny})
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Admit = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Admit = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}
