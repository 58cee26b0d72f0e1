package jobs

import (
	"slices"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestSimilarIDs: the ids a mistyped one most likely stands for, nearest
// first, for the "no such job" errors of submit; a deleted state is not
// suggested.
func TestSimilarIDs(t *testing.T) {
	t.Parallel()
	nc, topo := startTopology(t)
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	for _, id := range []string{"report-2026-12-03", "report-2026-12-04", "nightly-build", "a1", "nightly-built"} {
		if _, err := c.states.update(ctx, id, func(*State) (*State, error) {
			return &State{Queue: DefaultQueue, Status: StatusQueued, CreatedAt: time.Now().UTC()}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := topo.State.Delete(ctx, "nightly-built"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		id   string
		want []string
	}{
		{"report-2026-12-30", []string{"report-2026-12-03", "report-2026-12-04"}}, // a swap, then two edits
		{"Report-2026-12-03", []string{"report-2026-12-03", "report-2026-12-04"}}, // case aside
		{"nightly-biuld", []string{"nightly-build"}},
		{"a2", []string{"a1"}},
		{"report", nil},
		{"completely-else", nil},
	} {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			// Its own context: a parallel subtest may start long after
			// the parent's ran out (it waits for the package's others).
			if got := c.SimilarIDs(natstest.Context(t), tt.id); !slices.Equal(got, tt.want) {
				t.Errorf("SimilarIDs(%q) = %q, want %q", tt.id, got, tt.want)
			}
		})
	}
}
