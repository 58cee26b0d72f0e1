package agentloop

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/toolcache"
)

// leftOutNote is the note saying how many hits were left out.
var leftOutNote = regexp.MustCompile(`^Note: (\d+) more hits? (?:do|does) not fit in the output`)

// checkSearchFit fails unless out is within max bytes, its note lines
// are followed by a valid JSON array of hits, and the hits shown plus
// those the note says were left out are all of them.
func checkSearchFit(t *testing.T, out string, limit, total int) {
	t.Helper()
	if len(out) > limit {
		t.Fatalf("limit %d: the answer is %d bytes:\n%s", limit, len(out), out)
	}
	// Note lines, then the hits on one line.
	i := strings.LastIndexByte(out, '\n')
	notes, rest := "", out
	if i >= 0 {
		notes, rest = out[:i], out[i+1:]
	}
	left := 0
	for line := range strings.SplitSeq(notes, "\n") {
		if m := leftOutNote.FindStringSubmatch(line); m != nil {
			left, _ = strconv.Atoi(m[1])
		}
	}
	var hits []searchHit
	if err := json.Unmarshal([]byte(rest), &hits); err != nil {
		t.Fatalf("limit %d: the hits are not valid JSON (%v):\n%s", limit, err, out)
	}
	if len(hits)+left != total {
		t.Fatalf("limit %d: %d hits shown and %d said left out, of %d:\n%s", limit, len(hits), left, total, out)
	}
}

// A search_tools answer stays within the tool output limit down to its
// 256-byte floor: the hits that fit (one shortened when it alone is too
// long, none when not even that fits), as a valid JSON array, and a note
// of how many were left out. With MaxToolOutput near 256, one hit (a
// description of characters JSON escapes, a long signature) or the notes
// (a quoted query, unavailable servers) went over the limit, and the
// loop's cut ended the answer mid-hit.
func TestSearchAnswerFitsAtAnyLimit(t *testing.T) {
	t.Parallel()
	hit := func(i int, desc, call string) searchHit {
		name := fmt.Sprintf("tool_%02d_%s", i, strings.Repeat("n", 40))
		return searchHit{Name: name, Server: "server_with_a_long_name", Description: desc, Call: name + call}
	}
	var escaping, long, small []searchHit
	for i := range 12 {
		escaping = append(escaping, hit(i, strings.Repeat("<&>\"é", 32), "(a: string)"))
		long = append(long, hit(i, strings.Repeat("Describe it. ", 12), "("+strings.Repeat("param: string, ", 19)+"last?: integer)"))
		small = append(small, searchHit{Name: fmt.Sprintf("t%d", i), Description: "d", Call: fmt.Sprintf("t%d()", i)})
	}
	bigQuery := strings.Repeat("q", 100_000)
	var names []string
	for i := range maxAddedNamed {
		names = append(names, fmt.Sprintf("new_%d_%s", i, strings.Repeat("x", 58)))
	}
	var downs []toolcache.ServerStatus
	for i := range 25 {
		downs = append(downs, toolcache.ServerStatus{Name: fmt.Sprintf("down_%d", i), State: "failed", Error: strings.Repeat("connection refused; ", 20)})
	}
	tests := []struct {
		name  string
		a     searchAnswer
		query string
	}{
		{"escaping descriptions", searchAnswer{hits: escaping}, "x"},
		{"long signatures", searchAnswer{hits: long}, "x"},
		{"weak", searchAnswer{hits: long, weak: true}, "x"},
		{"fallback quoting a huge query", searchAnswer{hits: escaping, fallback: true}, bigQuery},
		{"empty query", searchAnswer{hits: long, fallback: true}, " "},
		{"server meant, huge filter", searchAnswer{hits: long, meant: strings.Repeat("m", 64), fallback: true}, bigQuery},
		{"unavailable servers", searchAnswer{hits: long, down: downs}, "x"},
		{"unavailable servers, small hits", searchAnswer{hits: small, fallback: true, down: downs}, bigQuery},
		{"unavailable servers, server meant, escaping", searchAnswer{hits: escaping, meant: strings.Repeat("m", 64), fallback: true, down: downs}, bigQuery},
		{"one hit", searchAnswer{hits: long[:1], weak: true}, "x"},
		{"tools listed since the job started", searchAnswer{hits: long, added: 12, addedNames: names, down: downs}, bigQuery},
		{"only tools listed since", searchAnswer{added: 12, addedNames: names}, "x"},
		{"words no tool has", searchAnswer{hits: escaping, unmatched: []string{strings.Repeat("w", 64), strings.Repeat("é", 32), "a", "b", "c"}, down: downs}, "x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for max := 256; max <= 4096; max += 7 {
				out := tc.a.fit(tc.query, tc.query, max)
				checkSearchFit(t, out, max, len(tc.a.hits))
			}
		})
	}
}
