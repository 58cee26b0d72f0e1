package jobs

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/textdist"
)

// Bounds of SimilarIDs: a state bucket with more keys than similarScanMax
// is not read for suggestions (each key crosses the wire), and the reading
// takes at most similarScanTime.
const (
	similarScanMax  = 100_000
	similarScanTime = 5 * time.Second
)

// SimilarIDs returns, nearest first, up to three ids of jobs with a state
// that id is likely a typo of (by textdist.Distance, case aside, at most
// one edit per four letters): what "no such job" can suggest. It is best
// effort: nil when the bucket holds more than similarScanMax keys or
// cannot be read in time.
//
// The keys are read as the subjects of the bucket's stream, in one
// request, rather than by the bucket's key listing: that watches the
// bucket and, on a loaded machine, ended before delivering any key.
func (c *Client) SimilarIDs(ctx context.Context, id string) []string {
	ctx, cancel := context.WithTimeout(ctx, similarScanTime)
	defer cancel()
	bucket := c.topo.State.Bucket()
	s, err := c.topo.JS.Stream(ctx, "KV_"+bucket)
	if err != nil {
		return nil
	}
	if info := s.CachedInfo(); info == nil || info.State.NumSubjects > similarScanMax {
		return nil
	}
	prefix := "$KV." + bucket + "."
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		return nil
	}
	type near struct {
		id string
		d  int
	}
	var found []near
	lid := strings.ToLower(id)
	for subj := range info.State.Subjects {
		k, ok := strings.CutPrefix(subj, prefix)
		if !ok || k == id || !ValidID(k) {
			continue
		}
		if d := textdist.Distance(lid, strings.ToLower(k)); d <= max(1, len(k)/4) {
			found = append(found, near{k, d})
		}
	}
	slices.SortFunc(found, func(a, b near) int { return cmp.Or(cmp.Compare(a.d, b.d), strings.Compare(a.id, b.id)) })
	var out []string
	for _, n := range found {
		if len(out) == 3 {
			break
		}
		// A subject may hold only the marker of a deleted state.
		if _, err := c.topo.State.Get(ctx, n.id); errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		} else if err != nil {
			return nil
		}
		out = append(out, n.id)
	}
	return out
}
