package agentloop

import (
	"sort"
	"strings"

	"github.com/jetagent/jetagent/internal/textdist"
)

// closestNames returns up to n names nearest to name: names containing it
// (or contained in it) first, then by edit distance.
func closestNames(name string, names []string, n int) []string {
	type scored struct {
		name  string
		score int
	}
	lname := strings.ToLower(name)
	s := make([]scored, 0, len(names))
	for _, c := range names {
		lc := strings.ToLower(c)
		d := textdist.Distance(lname, lc)
		if lname != "" && (strings.Contains(lc, lname) || strings.Contains(lname, lc)) {
			d -= 100
		}
		s = append(s, scored{c, d})
	}
	sort.Slice(s, func(i, j int) bool {
		if s[i].score != s[j].score {
			return s[i].score < s[j].score
		}
		return s[i].name < s[j].name
	})
	out := make([]string, 0, n)
	for i := 0; i < len(s) && i < n; i++ {
		out = append(out, s[i].name)
	}
	return out
}
