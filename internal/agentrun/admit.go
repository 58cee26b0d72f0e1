package agentrun

import (
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/jobs"
)

// Admit is the door check of jobs.Config.Admit: it refuses a job whose
// client tool declarations are invalid or beyond clienttools' size limits,
// so such a job is dead-lettered with the reason instead of failing once
// it runs.
func Admit(j *jobs.Job) error {
	if len(j.ClientTools) == 0 {
		return nil
	}
	return clienttools.ValidateDecls(j.ClientTools, clienttools.DeclLimits{})
}
