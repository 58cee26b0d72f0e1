package toolcache

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func loadDevSet(t testing.TB) []EvalItem {
	t.Helper()
	items, err := LoadEvalItems(filepath.Join("..", "..", "..", "shared", "retrieval", "livemcpbench-dev.jsonl"))
	if err != nil {
		t.Skipf("dev set not available: %v", err)
	}
	return items
}

// devHalves splits the development set into its fixed choosing (0) and
// reporting (1) halves (EvalHalf).
func devHalves(items []EvalItem) (choose, report []EvalItem) {
	for _, it := range items {
		if EvalHalf(it) == 0 {
			choose = append(choose, it)
		} else {
			report = append(report, it)
		}
	}
	return choose, report
}

var recallKs = []int{1, 5, 10, 20}

// searchVariant is one set of ranking choices in the evaluation table.
type searchVariant struct {
	name string
	p    searchParams
}

// plainBM25 is BM25 over name, description and parameter names, plurals
// folded: the baseline of the issue.
var plainBM25 = searchParams{
	k1: 1.2,
	w:  [numFields]float64{1, 0, 1, 1, 0, 0},
	b:  [numFields]float64{0.75, 0.75, 0.75, 0.75, 0.75, 0.75},
}

func searchVariants() []searchVariant {
	with := func(base searchParams, f func(*searchParams)) searchParams {
		f(&base)
		return base
	}
	d := defaultSearchParams
	return []searchVariant{
		{"plain BM25 (name, description, parameter names)", plainBM25},
		{"default", d},
		{"start: name x3, server field x1, synonyms 0.5, server evidence 0.5", with(d, func(p *searchParams) { p.w[fName], p.w[fServer], p.syn, p.srv = 3, 1, 0.5, 0.5 })},
		{"default, no stemming (plurals folded)", with(d, func(p *searchParams) { p.stem = false })},
		{"default, no synonyms", with(d, func(p *searchParams) { p.syn = 0 })},
		{"default, synonyms 0.5", with(d, func(p *searchParams) { p.syn = 0.5 })},
		{"default, synonyms: best of a group, not the sum", with(d, func(p *searchParams) { p.synMax = true })},
		{"default, no typo tolerance", with(d, func(p *searchParams) { p.typo = 0 })},
		{"default, no server evidence", with(d, func(p *searchParams) { p.srv = 0 })},
		{"default, server evidence 1.6 (greedy's pick; puts a weak tool of a matching server first: TestSearch fails)", with(d, func(p *searchParams) { p.srv = 1.6 })},
		{"default, server evidence added 0.3", with(d, func(p *searchParams) { p.srvAdd = 0.3 })},
		{"default, name x3", with(d, func(p *searchParams) { p.w[fName] = 3 })},
		{"default, no server field", with(d, func(p *searchParams) { p.w[fServer] = 0 })},
		{"default, server field x1", with(d, func(p *searchParams) { p.w[fServer] = 1 })},
		{"default, parameter descriptions x1", with(d, func(p *searchParams) { p.w[fParamDesc] = 1 })},
		{"default, no parameter descriptions", with(d, func(p *searchParams) { p.w[fParamDesc] = 0 })},
		{"default, all b=0.75", with(d, func(p *searchParams) { p.b = plainBM25.b })},
		{"default, k1=2.0", with(d, func(p *searchParams) { p.k1 = 2 })},
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
	ix := buildSearchIndexWith(r.current().tools, p)
	return func(q string, k int) []Tool {
		res := ix.Search(q, SearchOptions{Limit: k})
		out := make([]Tool, len(res.Hits))
		for i, h := range res.Hits {
			out[i] = h.Tool
		}
		return out
	}
}

// TestSearchRecall scores first-search recall@k on the LiveMCPBench
// development set, on its fixed choosing and reporting halves: one search
// per task with the whole task as the query, over its own catalog and
// pooled with every other catalog as distractors. Choices were made on the
// choosing half only (go test -run SearchRecall -v logs both tables).
func TestSearchRecall(t *testing.T) {
	t.Parallel()
	items := loadDevSet(t)
	choose, report := devHalves(items)
	own, pooled := searchEvalCatalogs(t)
	for _, half := range []struct {
		name  string
		items []EvalItem
	}{{"choosing half", choose}, {"reporting half", report}} {
		var sb strings.Builder
		fmt.Fprintf(&sb, "%s: %d tasks with gold tools; own catalog %d tools, pooled %d\n\n", half.name, countGold(half.items), own.Count(), pooled.Count())
		sb.WriteString("| variant | own R@1 | R@5 | R@10 | R@20 | pooled R@1 | R@5 | R@10 | R@20 | mean |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, v := range searchVariants() {
			a := Evaluate(variantSearch(own, v.p), half.items, recallKs).Recall
			b := Evaluate(variantSearch(pooled, v.p), half.items, recallKs).Recall
			mean := (a[0] + a[1] + a[2] + a[3] + b[0] + b[1] + b[2] + b[3]) / 8
			fmt.Fprintf(&sb, "| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |\n", v.name, a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3], mean)
		}
		t.Log("\n" + sb.String())
	}
	// The registry's own search is the default variant, and no worse than
	// plain BM25 at recall@10 on the whole set, own or pooled.
	for _, r := range []*Registry{own, pooled} {
		got := Evaluate(EvalSearch(r), items, recallKs).Recall
		plain := Evaluate(variantSearch(r, plainBM25), items, recallKs).Recall
		if got[2] < plain[2] {
			t.Errorf("%d tools: recall@10 %.3f < plain BM25's %.3f", r.Count(), got[2], plain[2])
		}
	}
}

// BenchmarkSearchDevQueries is the latency of one first search (a whole
// task as the query, limit 10) over all shared catalogs pooled, cycling
// through the development set's tasks.
func BenchmarkSearchDevQueries(b *testing.B) {
	items := loadDevSet(b)
	_, pooled := searchEvalCatalogs(b)
	for _, v := range []searchVariant{{"plain", plainBM25}, {"default", defaultSearchParams}} {
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

func countGold(items []EvalItem) int {
	n := 0
	for _, it := range items {
		if len(it.Gold) > 0 {
			n++
		}
	}
	return n
}
