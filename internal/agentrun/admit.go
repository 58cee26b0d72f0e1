package agentrun

import (
	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// Admit is the door check of jobs.Config.Admit: it refuses a job whose
// allow or deny globs are malformed, or whose client tool declarations are
// invalid, beyond clienttools' size limits or named like a tool the worker
// answers itself, so such a job is dead-lettered with the reason instead
// of failing once it runs (or, with no MCP servers to filter, running with
// a glob that means nothing). submit runs the same declaration check
// (DeclLimits) before publishing.
func Admit(j *jobs.Job) error {
	if err := toolcache.CheckGlobs("allow", j.Allow); err != nil {
		return err
	}
	if err := toolcache.CheckGlobs("deny", j.Deny); err != nil {
		return err
	}
	if len(j.ClientTools) == 0 {
		return nil
	}
	return clienttools.ValidateDecls(j.ClientTools, DeclLimits())
}

// DeclLimits are the limits client tool declarations must keep.
func DeclLimits() clienttools.DeclLimits {
	return clienttools.DeclLimits{Reserved: agentloop.BuiltinTools()}
}

// offeredClientTools are the job's client tools its allow and deny globs
// let through, as for server tools (a client tool has no server, so only
// its name is matched).
func offeredClientTools(j *jobs.Job) []clienttools.Decl {
	var out []clienttools.Decl
	for _, d := range j.ClientTools {
		if toolcache.GlobsAllow(j.Allow, j.Deny, d.Name) {
			out = append(out, d)
		}
	}
	return out
}
