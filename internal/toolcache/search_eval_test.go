package toolcache

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// devItem is one task of ../shared/retrieval/livemcpbench-dev.jsonl: gold
// tools by their servers' own names, with the servers that offer each.
type devItem struct {
	ID    string `json:"id"`
	Query string `json:"query"`
	Gold  []struct {
		Tool    string   `json:"tool"`
		Servers []string `json:"servers"`
	} `json:"gold"`
}

func loadDevSet(t testing.TB) []devItem {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "..", "shared", "retrieval", "livemcpbench-dev.jsonl"))
	if err != nil {
		t.Skipf("dev set not available: %v", err)
	}
	defer f.Close()
	var items []devItem
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var it devItem
		if err := json.Unmarshal(sc.Bytes(), &it); err != nil {
			t.Fatal(err)
		}
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return items
}

var recallKs = []int{1, 5, 10, 20}

// recallAt is the share of an item's gold tools among the first k results
// of one search with the whole task, averaged over the items that have gold
// tools, for each k of recallKs. A result matches a gold tool by Original
// name and one of its servers.
func recallAt(search func(string, int) []Tool, items []devItem) []float64 {
	sum := make([]float64, len(recallKs))
	n := 0
	for _, it := range items {
		if len(it.Gold) == 0 {
			continue
		}
		n++
		hits := search(it.Query, recallKs[len(recallKs)-1])
		for ki, k := range recallKs {
			found := 0
			for _, g := range it.Gold {
				for _, h := range hits[:min(k, len(hits))] {
					if h.Original == g.Tool && (len(g.Servers) == 0 || slices.Contains(g.Servers, h.Server)) {
						found++
						break
					}
				}
			}
			sum[ki] += float64(found) / float64(len(it.Gold))
		}
	}
	for i := range sum {
		sum[i] /= float64(n)
	}
	return sum
}

// searchVariant is one set of ranking choices in the evaluation table.
type searchVariant struct {
	name string
	p    searchParams
}

// v0 is the first version of the search: model-facing name x3, title,
// description and parameter names, plurals folded, no other choices.
var v0 = searchParams{k1: 1.2, b: 0.75, name: 3, title: 1, desc: 1, paramName: 1, qualifiedName: true}

func searchVariants() []searchVariant {
	with := func(base searchParams, f func(*searchParams)) searchParams {
		f(&base)
		return base
	}
	v1 := with(v0, func(p *searchParams) { p.qualifiedName = false })
	v2 := with(v1, func(p *searchParams) { p.distinctQuery = true })
	v3 := with(v2, func(p *searchParams) { p.server = 1 })
	v4 := with(v3, func(p *searchParams) { p.paramDesc = 1 })
	d := defaultSearchParams
	return []searchVariant{
		// Built up one choice at a time from the first version.
		{"v0: first version", v0},
		{"v1: v0, name field = server's own name", v1},
		{"v2: v1 + distinct query terms", v2},
		{"v3: v2 + server name field", v3},
		{"v4: v3 + parameter descriptions", v4},
		{"v4 + CJK bigrams", with(v4, func(p *searchParams) { p.cjk = true })},
		{"v4 + split words also whole", with(v4, func(p *searchParams) { p.join = true })},
		{"default: v4 + CJK bigrams + split words also whole", d},
		// Weights and BM25 parameters around the default.
		{"default, name x1", with(d, func(p *searchParams) { p.name = 1 })},
		{"default, name x2", with(d, func(p *searchParams) { p.name = 2 })},
		{"default, name x5", with(d, func(p *searchParams) { p.name = 5 })},
		{"default, server x2", with(d, func(p *searchParams) { p.server = 2 })},
		{"default, server x3", with(d, func(p *searchParams) { p.server = 3 })},
		{"default, no parameter names", with(d, func(p *searchParams) { p.paramName = 0 })},
		{"default, k1=0.9 b=0.4", with(d, func(p *searchParams) { p.k1, p.b = 0.9, 0.4 })},
		{"default, k1=1.2 b=0.3", with(d, func(p *searchParams) { p.k1, p.b = 1.2, 0.3 })},
		{"default, k1=2.0 b=0.75", with(d, func(p *searchParams) { p.k1, p.b = 2, 0.75 })},
	}
}

// searchEvalCatalogs loads the LiveMCPBench catalog alone and pooled with
// every other shared catalog, as registries.
func searchEvalCatalogs(t testing.TB) (own, pooled *Registry) {
	t.Helper()
	_, live, err := LoadCatalog(catalogPath(t, "livemcptool-70servers"))
	if err != nil {
		t.Skipf("catalogs not available: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "shared", "catalogs", "*.json"))
	var pool [][]Tool
	for _, f := range files {
		_, tools, err := LoadCatalog(f)
		if err != nil {
			t.Fatal(err)
		}
		pool = append(pool, tools)
	}
	return NewRegistry(live), NewRegistry(pool...)
}

func variantSearch(r *Registry, p searchParams) func(string, int) []Tool {
	tools := r.current().tools
	ix := buildSearchIndexWith(tools, p)
	return func(q string, k int) []Tool { return ix.search(tools, q, k) }
}

// TestSearchRecall scores first-search recall@k on the LiveMCPBench
// development set: one search per task with the whole task as the query,
// over its own catalog and pooled with every other catalog as distractors.
// It logs a table of the variants (go test -run SearchRecall -v).
func TestSearchRecall(t *testing.T) {
	t.Parallel()
	items := loadDevSet(t)
	own, pooled := searchEvalCatalogs(t)
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d tasks with gold tools; own catalog %d tools, pooled %d\n\n", countGold(items), own.Count(), pooled.Count())
	sb.WriteString("| variant | own R@1 | R@5 | R@10 | R@20 | pooled R@1 | R@5 | R@10 | R@20 | mean |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, v := range searchVariants() {
		a := recallAt(variantSearch(own, v.p), items)
		b := recallAt(variantSearch(pooled, v.p), items)
		mean := (a[0] + a[1] + a[2] + a[3] + b[0] + b[1] + b[2] + b[3]) / 8
		fmt.Fprintf(&sb, "| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |\n", v.name, a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3], mean)
	}
	t.Log("\n" + sb.String())
	// The registry's own Search is the default variant, and no worse than
	// the first version at any k, own or pooled.
	for _, r := range []*Registry{own, pooled} {
		got := recallAt(r.Search, items)
		first := recallAt(variantSearch(r, v0), items)
		for i, k := range recallKs {
			if got[i] < first[i] {
				t.Errorf("%d tools: recall@%d %.3f < first version's %.3f", r.Count(), k, got[i], first[i])
			}
		}
	}
}

// BenchmarkSearchDevQueries is the latency of one first search (a whole
// task as the query, limit 10) over all shared catalogs pooled, cycling
// through the development set's tasks: the first version's ranking against
// the default, both on the inverted index.
func BenchmarkSearchDevQueries(b *testing.B) {
	items := loadDevSet(b)
	_, pooled := searchEvalCatalogs(b)
	for _, v := range []searchVariant{{"v0", v0}, {"default", defaultSearchParams}} {
		b.Run(v.name, func(b *testing.B) {
			search := variantSearch(pooled, v.p)
			i := 0
			for b.Loop() {
				search(items[i%len(items)].Query, 10)
				i++
			}
		})
	}
}

func countGold(items []devItem) int {
	n := 0
	for _, it := range items {
		if len(it.Gold) > 0 {
			n++
		}
	}
	return n
}
