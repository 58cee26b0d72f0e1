package toolcache

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
	return items
}

var recallKs = []int{1, 5, 10, 20}

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
					if h.Original == g.Tool && (len(g.Servers) == 0 || contains(g.Servers, h.Server)) {
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

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
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
		// Further choices, each alone on v4.
		{"v4 + NLTK stop words", with(v4, func(p *searchParams) { p.stop = englishStopWords })},
		{"v4 + light stemming", with(v4, func(p *searchParams) { p.stem = stemLight })},
		{"v4 + CJK bigrams", with(v4, func(p *searchParams) { p.cjk = true })},
		{"v4 + split words also whole", with(v4, func(p *searchParams) { p.join = true })},
		{"v4 + CJK bigrams + split words also whole", with(v4, func(p *searchParams) { p.cjk, p.join = true, true })},
		{"v4 + all four", with(v4, func(p *searchParams) {
			p.stop, p.stem, p.cjk, p.join = englishStopWords, stemLight, true, true
		})},
		{"v4 + server mix 0.2", with(v4, func(p *searchParams) { p.serverMix = 0.2 })},
		{"v4 + server mix 0.35", with(v4, func(p *searchParams) { p.serverMix = 0.35 })},
		{"v4 + feedback 3 docs, 10 terms, 0.3", with(v4, func(p *searchParams) { p.fbDocs, p.fbTerms, p.fbWeight = 3, 10, 0.3 })},
		{"v4 + feedback 5 docs, 20 terms, 0.5", with(v4, func(p *searchParams) { p.fbDocs, p.fbTerms, p.fbWeight = 5, 20, 0.5 })},
		// Weights and BM25 parameters around the default.
		{"default", d},
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
	// The registry's own Search is the default variant.
	got, want := recallAt(own.Search, items), recallAt(variantSearch(own, defaultSearchParams), items)
	if got[2] != want[2] {
		t.Errorf("Registry.Search recall@10 %.3f != default variant %.3f", got[2], want[2])
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
