package jobs_test

import (
	"fmt"

	"github.com/jetagent/jetagent/internal/jobs"
)

// The worker and the submit CLI refuse a bad job with the same words.
func ExampleValidator_DecodeJob() {
	v, err := jobs.NewValidator(0)
	if err != nil {
		panic(err)
	}
	for _, payload := range []string{
		`{"task": "summarise the repo", "servers": ["files"], "timeout": "90s"}`,
		`{"task": "x"`,
		`{"task": "", "max_rounds": 0}`,
	} {
		j, err := v.DecodeJob([]byte(payload))
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("ok: %q on %v\n", j.Task, j.Servers)
	}
	// Output:
	// ok: "summarise the repo" on [files]
	// job is not JSON: unexpected EOF
	// job fails schemas/job.schema.json: at '/max_rounds': minimum: got 0, want 1; at '/task': minLength: got 0, want 1
}

func ExampleNames() {
	n := jobs.Names{Prefix: "agent"}
	fmt.Println(n.JobsSubject("default"))
	fmt.Println(n.EventsFilter("01JOB"))
	fmt.Println(n.StateBucket(), n.TranscriptBucket(), n.DLQStream())
	// Output:
	// agent.jobs.default
	// agent.events.01JOB.>
	// AGENT_STATE AGENT_TRANSCRIPTS AGENT_DLQ
}
