package main

import (
	"fmt"
	"path"
	"slices"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/textdist"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// jobNotes says which of a job's settings the loop does not apply as
// given: a max_rounds above JETAGENT_MAX_ROUNDS_CAP runs to the cap, and an
// allow or deny glob that matches none of the tools the job could see
// selects nothing (a misspelt "read_flie" leaves the job without the tool).
// The worker puts each note in the job's started event and its log. pool
// may be nil (no MCP servers).
func jobNotes(lc agentloop.Config, pool *toolcache.Pool) func(*jobs.Job) []string {
	return func(j *jobs.Job) []string {
		var notes []string
		if j.MaxRounds > lc.MaxRoundsCap {
			notes = append(notes, fmt.Sprintf("max_rounds %d is above the cap %d (JETAGENT_MAX_ROUNDS_CAP): at most %d rounds apply",
				j.MaxRounds, lc.MaxRoundsCap, lc.MaxRoundsCap))
		}
		return append(notes, globNotes(j, pool)...)
	}
}

// globNotes names each allow or deny glob of j that matches no tool of its
// servers (as the pool has them now) or of its client tools, with the tool
// name it probably meant.
func globNotes(j *jobs.Job, pool *toolcache.Pool) []string {
	if len(j.Allow) == 0 && len(j.Deny) == 0 {
		return nil
	}
	var names []string
	if pool != nil {
		// The resource bridge the loop adds when the servers list resources:
		// the globs cover it too.
		names = append(names, agentloop.ToolListResources, agentloop.ToolReadResource)
		for _, t := range pool.Registry().List() {
			if j.Servers == nil || slices.Contains(j.Servers, t.Server) {
				names = append(names, t.Name, t.Original)
			}
		}
	}
	for _, d := range j.ClientTools {
		names = append(names, d.Name)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	var notes []string
	for _, g := range []struct {
		kind  string
		globs []string
	}{{"allow", j.Allow}, {"deny", j.Deny}} {
		for _, glob := range g.globs {
			if slices.ContainsFunc(names, func(n string) bool { ok, _ := path.Match(glob, n); return ok }) {
				continue
			}
			note := fmt.Sprintf("%s %q matches no tool of the job", g.kind, glob)
			if near := textdist.Closest(glob, names); near != "" {
				note += fmt.Sprintf(" (did you mean %q?)", near)
			}
			notes = append(notes, note)
		}
	}
	return notes
}
