package agentloop

import (
	"sort"
	"strings"
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
		d := levenshtein(lname, lc)
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

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
