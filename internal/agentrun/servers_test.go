package agentrun_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/agentrun"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// TestJobServersSelectTheTools: through Client.Submit, a worker and a real
// tool pool, a job without servers is offered every server's tools and a
// job with an empty list none (schemas/job.schema.json). The empty list
// used to be dropped on the way (Job's omitempty), so "no servers" ran
// with every server.
func TestJobServersSelectTheTools(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		servers []string
		want    []string // tool names the model is offered
	}{
		{"absent: every server", nil, []string{"read_file"}},
		{"empty: none", []string{}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := corpusPool(t, map[string]json.RawMessage{"read_file": json.RawMessage(`{"type":"object"}`)})
			h := start(t, agentloop.Config{}, agentrun.Config{Pool: pool}, llmtest.Reply{Content: "done"})
			st := h.run(t, &jobs.Job{Task: "x", ToolMode: "full", Servers: tt.servers})
			if st.Status != jobs.StatusSucceeded {
				t.Fatalf("state %+v", st)
			}
			reqs := h.model.Requests()
			if len(reqs) != 1 {
				t.Fatalf("%d model requests", len(reqs))
			}
			var names []string
			for _, tool := range reqs[0].Tools {
				names = append(names, tool.Name)
			}
			if !slices.Equal(names, tt.want) {
				t.Errorf("the model was offered %q; want %q", names, tt.want)
			}
		})
	}
}
