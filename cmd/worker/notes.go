package main

import (
	"fmt"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/jobs"
)

// jobNotes says which of a job's settings the loop does not apply as
// given: a max_rounds above JETAGENT_MAX_ROUNDS_CAP runs to the cap. The
// worker puts each note in the job's started event and its log.
func jobNotes(lc agentloop.Config) func(*jobs.Job) []string {
	return func(j *jobs.Job) []string {
		if j.MaxRounds > lc.MaxRoundsCap {
			return []string{fmt.Sprintf("max_rounds %d is above the cap %d (JETAGENT_MAX_ROUNDS_CAP): at most %d rounds apply",
				j.MaxRounds, lc.MaxRoundsCap, lc.MaxRoundsCap)}
		}
		return nil
	}
}
