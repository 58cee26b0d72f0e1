package toolcache

import (
	"fmt"
	"os"
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

// previousSynonymGroups is the synonym list before it was cut to general
// vocabulary (kept to compare: it had topic groups written with the
// development set in view).
var previousSynonymGroups = [][]string{
	{"get", "fetch", "read", "retrieve", "obtain", "load", "lookup"},
	{"create", "add", "new", "make", "insert", "generate"},
	{"delete", "remove", "erase", "destroy", "drop", "unlink"},
	{"update", "edit", "modify", "change", "patch", "rename"},
	{"list", "search", "find", "query", "browse", "enumerate", "lookup"},
	{"write", "save", "store", "put"},
	{"send", "post", "publish", "submit"},
	{"run", "execute", "exec", "launch", "start", "invoke"},
	{"stop", "kill", "terminate", "halt", "cancel", "abort"},
	{"show", "display", "view", "describe", "detail", "info", "information"},
	{"download", "fetch"},
	{"upload", "attach"},
	{"convert", "transform", "export"},
	{"summary", "summarize", "overview"},
	{"issue", "ticket", "bug"},
	{"repo", "repository"},
	{"directory", "folder", "dir"},
	{"file", "document", "doc"},
	{"message", "msg", "chat"},
	{"email", "mail"},
	{"image", "picture", "photo", "img"},
	{"video", "movie", "film", "clip"},
	{"music", "song", "track", "audio"},
	{"chart", "graph", "plot", "diagram", "visualization", "visualize"},
	{"table", "spreadsheet", "sheet"},
	{"database", "db"},
	{"user", "account", "member", "profile"},
	{"event", "meeting", "appointment", "calendar", "schedule"},
	{"location", "place", "address", "position"},
	{"route", "direction", "navigate", "navigation"},
	{"nearby", "near", "around", "vicinity"},
	{"price", "cost", "quote", "fee"},
	{"stock", "share", "equity", "ticker"},
	{"news", "headline", "article"},
	{"paper", "publication", "preprint", "article"},
	{"url", "link", "website", "webpage", "page", "site"},
	{"screenshot", "capture"},
	{"click", "press", "tap"},
	{"comment", "reply", "annotation"},
	{"weather", "forecast", "temperature"},
	{"translate", "translation"},
	{"word", "term", "keyword"},
	{"trend", "trending", "popular", "hot", "rank", "ranking", "top"},
	{"recipe", "cook", "dish", "meal"},
	{"movie", "cinema"},
	{"job", "career", "position", "vacancy"},
	{"travel", "trip", "journey"},
	{"hotel", "accommodation", "lodging"},
	{"flight", "airline", "plane"},
}

var previousSynonyms = &synTable{groups: previousSynonymGroups}

// previousSearchParams is the ranking before query stop words,
// abbreviations, path/URL words, capped synonyms and the general synonym
// list.
var previousSearchParams = func() searchParams {
	p := defaultSearchParams
	p.syns, p.qstop, p.prefix, p.entity, p.altCap = previousSynonyms, false, 0, 0, false
	return p
}()

func searchVariants() []searchVariant {
	with := func(base searchParams, f func(*searchParams)) searchParams {
		f(&base)
		return base
	}
	d := defaultSearchParams
	return []searchVariant{
		{"plain BM25 (name, description, parameter names)", plainBM25},
		{"previous default (topic synonyms, no query stop words, abbreviations, path/URL words, capped synonyms)", previousSearchParams},
		{"default", d},
		{"default, previous synonym list", with(d, func(p *searchParams) { p.syns = previousSynonyms })},
		{"default, no synonyms", with(d, func(p *searchParams) { p.syn = 0 })},
		{"default, synonyms: best of a group, not the sum", with(d, func(p *searchParams) { p.synMax = true })},
		{"default, synonyms not capped at the word's IDF", with(d, func(p *searchParams) { p.altCap = false })},
		{"default, no query stop words", with(d, func(p *searchParams) { p.qstop = false })},
		{"default, no abbreviations (name-word prefixes)", with(d, func(p *searchParams) { p.prefix = 0 })},
		{"default, no path/URL words", with(d, func(p *searchParams) { p.entity = 0 })},
		{"default, path/URL words 0.5", with(d, func(p *searchParams) { p.entity = 0.5 })},
		{"default, no typo tolerance", with(d, func(p *searchParams) { p.typo = 0 })},
		{"default, no server evidence", with(d, func(p *searchParams) { p.srv = 0 })},
		{"default, server evidence added 0.3", with(d, func(p *searchParams) { p.srvAdd = 0.3 })},
		{"default, no server field", with(d, func(p *searchParams) { p.w[fServer] = 0 })},
		{"default, no stemming (plurals folded)", with(d, func(p *searchParams) { p.stem = false })},
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

// TestLoadEvalItems reads a retrieval set as editors write it (a byte order
// mark, CRLF, blank lines), with gold tools and alternatives in each form,
// and refuses a line it could only score wrong, naming it.
func TestLoadEvalItems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, data string
		want       string // items as id:query:gold|alternatives, or the error
	}{
		{"forms", "\xef\xbb\xbf" + `{"id":"1","query":"q one","gold_tools":["a","b"],"gold":[{"tool":"a","servers":["s"]}]}` + "\r\n\r\n" +
			`{"id":"2","query":"q two","gold_tools":[],"acceptable_alternatives":["x",{"tool":"y","servers":["s"]},[{"name":"z"}],{"tools":["w"]}]}` + "\n",
			"1:q one:a@s,b|;2:q two:|x,y@s,z,w"},
		{"no query", `{"id":"1","gold_tools":["a"]}`, `line 1: no "query"`},
		{"blank query", "\n" + `{"id":"1","query":"  ","gold_tools":["a"]}`, `line 2: no "query"`},
		{"not JSON", `{"id":"1","query":"q"}` + "\nnot json\n", "line 2: invalid character"},
		// Each case below was dropped without a word, refused naming Go
		// types, or refused where it can be read.
		{"gold by name and server", `{"id":"1","query":"q","gold":[{"name":"a","server":"s"},{"tool":"b","servers":"t"},{"tool":"a","servers":["u"]}]}`,
			"1:q:a@s+u,b@t|"},
		{"gold without a name", `{"id":"1","query":"q","gold":[{"tool":"a"},{"servers":["s"]}]}`, `line 1: gold[1]: {"servers":["s"]}: no "tool" (or "name")`},
		{"gold_tools as objects", `{"id":"1","query":"q","gold_tools":[{"tool":"a","servers":["s"]},"b"]}`, "1:q:a@s,b|"},
		{"gold_tools one name", `{"id":"1","query":"q","gold_tools":"a"}`, "1:q:a|"},
		{"gold_tools a number", `{"id":"1","query":"q","gold_tools":[1]}`, `line 1: gold_tools[0] is a number: want a tool name`},
		{"alternatives by gold tool", `{"id":"1","query":"q","gold_tools":["a"],"acceptable_alternatives":{"a":["x",{"tool":"y","server":"s"}],"b":"z"}}`,
			"1:q:a|x,y@s,z"},
		{"alternative a number", `{"id":"1","query":"q","gold_tools":["a"],"acceptable_alternatives":["x",2]}`,
			"line 1: acceptable_alternatives[1] is a number: want tool names"},
		{"alternative without a name", `{"id":"1","query":"q","acceptable_alternatives":[{"servers":["s"]}]}`,
			`line 1: acceptable_alternatives[0]: {"servers":["s"]}: no "tool" (or "name")`},
		{"query not a string", `{"id":"1","query":["hi"],"gold_tools":["a"]}`, `line 1: "query" is an array: want the request as a string`},
		{"numeric id", `{"id":7,"query":"q","gold_tools":["a"]}`, "7:q:a|"},
		{"a JSON array", "[\n" + `{"id":"1","query":"q one","gold_tools":["a"]},` + "\n" + `{"id":"2","query":"q two","gold_tools":["b"]}` + "\n]\n", "1:q one:a|;2:q two:b|"},
		{"an array of arrays", `[["q"]]`, `line 1, item 1 of the array: want one JSON object {"query", "gold_tools"} per item, got an array`},
		{"pretty-printed", "{\n  \"id\": \"1\",\n  \"query\": \"q\",\n  \"gold_tools\": [\"a\"]\n}\n{\n  \"id\": \"2\"\n}\n", `line 6: no "query"`},
		{"a line of a string", `"q"`, `line 1: want one JSON object {"query", "gold_tools"} per item, got a string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "q.jsonl")
			if err := os.WriteFile(path, []byte(tt.data), 0o600); err != nil {
				t.Fatal(err)
			}
			items, err := LoadEvalItems(path)
			if err != nil {
				if !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %v, want %q", err, tt.want)
				}
				return
			}
			tools := func(ts []EvalTool) string {
				var out []string
				for _, g := range ts {
					s := g.Tool
					if len(g.Servers) > 0 {
						s += "@" + strings.Join(g.Servers, "+")
					}
					out = append(out, s)
				}
				return strings.Join(out, ",")
			}
			var got []string
			for _, it := range items {
				got = append(got, it.ID+":"+it.Query+":"+tools(it.Gold)+"|"+tools(it.Alternatives))
			}
			if strings.Join(got, ";") != tt.want {
				t.Fatalf("got %s, want %s", strings.Join(got, ";"), tt.want)
			}
		})
	}
}

// TestResolveEvalTools: a set may name a gold tool with its server in
// front or as the model sees it (sanitized, or qualified when two
// servers offer it); each such name matched no tool before and counted as
// a miss in every item.
func TestResolveEvalTools(t *testing.T) {
	t.Parallel()
	reg := NewRegistry(
		[]Tool{{Name: "get weather", Server: "alpha"}, {Name: "search", Server: "alpha"}, {Name: "files.read", Server: "alpha"}},
		[]Tool{{Name: "get weather", Server: "beta"}, {Name: "create_issue", Server: "gh.com"}},
		[]Tool{{Name: "get.weather", Server: "gamma"}, {Name: "send mail", Server: "gamma"}},
		[]Tool{{Name: "send mail", Server: "delta"}},
	)
	tests := []struct {
		name, want string // want: the tool as EvalTool.String, "" when left as it is
		servers    []string
	}{
		{name: "alpha/search", want: "alpha/search"},
		{name: "alpha__search", want: "alpha/search"},
		{name: "alpha.search", want: "alpha/search"},
		{name: "alpha:search", want: "alpha/search"},
		{name: "gh.com/create_issue", want: "gh.com/create_issue"},
		{name: "gh_com__create_issue", want: "gh.com/create_issue"}, // the server as the model sees it
		{name: "alpha/get weather", want: "alpha/get weather"},
		{name: "beta/get_weather", want: "beta/get weather"},
		{name: "alpha.files.read", want: "alpha/files.read"},
		{name: "get_weather", want: ""},                             // "get weather" and "get.weather" both: left
		{name: "alpha/search", servers: []string{"beta"}, want: ""}, // not on the servers the set names
		{name: "delta/search", want: ""},
		{name: "files_read", want: ""},         // the model-facing name: matched as it is
		{name: "search", want: ""},             // its own name: as it is
		{name: "alpha__get_weather", want: ""}, // the model-facing name: matched as it is
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := EvalTool{Tool: tt.name, Servers: tt.servers}
			items := []EvalItem{{Query: "q", Gold: []EvalTool{g}, Alternatives: []EvalTool{g}}}
			got, notes := ResolveEvalTools(items, reg.List())
			if items[0].Gold[0].String() != g.String() {
				t.Fatalf("the items given were changed: %v", items[0].Gold)
			}
			want := tt.want
			if want == "" {
				want = g.String()
				if len(notes) != 0 {
					t.Errorf("notes %q for a name left as it is", notes)
				}
			} else if len(notes) != 1 {
				t.Errorf("notes %q, want one", notes)
			}
			if got[0].Gold[0].String() != want || got[0].Alternatives[0].String() != want {
				t.Errorf("gold %v, alternative %v, want %s", got[0].Gold, got[0].Alternatives, want)
			}
		})
	}
}
