package textdist

import "strings"

// Distance is the optimal-string-alignment distance of a and b, by runes:
// an insertion, a deletion, a substitution or a swap of neighbours counts
// one, so "stauts" is one from "status" (plain Levenshtein says two, and a
// swap is the commonest typo).
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rows: the swap looks two rows back.
	pp := make([]int, len(rb)+1)
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
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], pp[j-2]+1)
			}
		}
		pp, prev, cur = prev, cur, pp
	}
	return prev[len(rb)]
}

// Closest returns the candidate that w is most likely a typo of: the
// nearest by Distance, compared without regard to case, when it is at most
// one edit per four letters of the candidate away (at least one); the
// first of equally near ones; "" when none is that near.
func Closest(w string, candidates []string) string {
	lw := strings.ToLower(w)
	best, bestD := "", 0
	for _, c := range candidates {
		if d := Distance(lw, strings.ToLower(c)); d <= max(1, len([]rune(c))/4) && (best == "" || d < bestD) {
			best, bestD = c, d
		}
	}
	return best
}
