package toolcache

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"unicode"
)

// searchParams are the ranking choices of the tool search. Registry.Search
// uses defaultSearchParams; search_eval_test.go scores alternatives on the
// LiveMCPBench development set (docs/BENCHMARKS.md, "Tool search").
type searchParams struct {
	// BM25 saturation and length normalisation.
	k1, b float64
	// Field weights (a simple BM25F): a term found in a field adds the
	// field's weight to the tool's term frequency and to its length.
	name, server, title, desc, paramName, paramDesc float64
	// qualifiedName indexes the model-facing Name (server-qualified on
	// clashes) at weight name, plus Original at weight 1 when it differs,
	// instead of Original at weight name: the first version's behaviour,
	// kept for the evaluation's baseline.
	qualifiedName bool
	// distinctQuery counts a term repeated in the query once: a task that
	// says "report" three times is not three times as much about reports.
	distinctQuery bool
	// cjk indexes runs of Han, kana and Hangul as overlapping bigrams (these
	// scripts do not separate words with spaces).
	cjk bool
	// join also indexes a word split at case or digit changes whole.
	join bool
}

// defaultSearchParams is what Registry.Search uses.
var defaultSearchParams = searchParams{
	k1: 1.2, b: 0.75,
	name: 3, server: 1, title: 1, desc: 1, paramName: 1, paramDesc: 1,
	distinctQuery: true,
	cjk:           true,
	join:          true,
}

type posting struct {
	doc int32
	tf  float32
}

// searchIndex is an inverted index of one snapshot's tools: a query costs
// time in proportion to the postings of its terms, not to the catalog.
type searchIndex struct {
	p        searchParams
	postings map[string][]posting
	// norm is k1 * (1 - b + b*len/avgLen) per tool, the part of the BM25
	// denominator that depends only on the tool.
	norm []float64
	n    float64
	// exact maps a lower-cased Name or Original to its tools.
	exact map[string][]int
}

func buildSearchIndex(tools []Tool) *searchIndex {
	return buildSearchIndexWith(tools, defaultSearchParams)
}

func buildSearchIndexWith(tools []Tool, p searchParams) *searchIndex {
	ix := &searchIndex{p: p, postings: map[string][]posting{}, exact: map[string][]int{}, n: float64(len(tools))}
	lens := make([]float64, len(tools))
	total := 0.0
	for i, t := range tools {
		tf := map[string]float64{}
		add := func(text string, w float64) {
			if w == 0 {
				return
			}
			for _, term := range p.analyze(text) {
				tf[term] += w
				lens[i] += w
			}
		}
		if p.qualifiedName {
			add(t.Name, p.name)
			if t.Original != t.Name {
				add(t.Original, 1)
			}
		} else {
			add(t.Original, p.name)
		}
		add(t.Server, p.server)
		add(t.Title, p.title)
		add(t.Description, p.desc)
		names, descs := params(t.InputSchema)
		add(strings.Join(names, " "), p.paramName)
		add(strings.Join(descs, "\n"), p.paramDesc)
		for term, f := range tf {
			ix.postings[term] = append(ix.postings[term], posting{int32(i), float32(f)})
		}
		total += lens[i]
		name, orig := strings.ToLower(t.Name), strings.ToLower(t.Original)
		ix.exact[name] = append(ix.exact[name], i)
		if orig != name {
			ix.exact[orig] = append(ix.exact[orig], i)
		}
	}
	avg := 1.0
	if total > 0 {
		avg = total / float64(len(tools))
	}
	ix.norm = make([]float64, len(tools))
	for i, l := range lens {
		ix.norm[i] = p.k1 * (1 - p.b + p.b*l/avg)
	}
	return ix
}

// analyze turns text into index terms.
func (p searchParams) analyze(text string) []string { return tokens(text, p.cjk, p.join) }

func (ix *searchIndex) search(tools []Tool, query string, limit int) []Tool {
	if limit <= 0 {
		limit = 10
	}
	q := map[string]float64{}
	for _, t := range ix.p.analyze(query) {
		if ix.p.distinctQuery {
			q[t] = 1
		} else {
			q[t]++
		}
	}
	scores := make([]float64, len(tools))
	for term, w := range q {
		ps := ix.postings[term]
		if len(ps) == 0 {
			continue
		}
		df := float64(len(ps))
		idf := math.Log(1 + (ix.n-df+0.5)/(df+0.5))
		c := idf * w * (ix.p.k1 + 1)
		for _, po := range ps {
			f := float64(po.tf)
			scores[po.doc] += c * f / (f + ix.norm[po.doc])
		}
	}
	// A query that is a tool's name (model-facing or the server's own)
	// puts that tool first.
	for _, i := range ix.exact[strings.ToLower(strings.TrimSpace(query))] {
		scores[i] = math.Inf(1)
	}
	type hit struct {
		i     int
		score float64
	}
	var hits []hit
	for i, s := range scores {
		if s > 0 {
			hits = append(hits, hit{i, s})
		}
	}
	slices.SortFunc(hits, func(a, b hit) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return strings.Compare(tools[a.i].Name, tools[b.i].Name)
	})
	out := make([]Tool, 0, min(limit, len(hits)))
	for _, h := range hits[:min(limit, len(hits))] {
		out = append(out, tools[h.i])
	}
	return out
}

// params lists the top-level property names of a JSON Schema and their
// descriptions.
func params(schema json.RawMessage) (names, descs []string) {
	var s struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil, nil
	}
	names = sortedKeys(s.Properties)
	for _, n := range names {
		if d := s.Properties[n].Description; d != "" {
			descs = append(descs, d)
		}
	}
	return names, descs
}

// terms is the word split of the search, without the whole forms of split
// words.
func terms(text string) []string { return tokens(text, defaultSearchParams.cjk, false) }

// tokens splits text into lower-case search terms: on anything that is not a
// letter or digit, and at camelCase and letter/digit boundaries; common
// English stop words are dropped and plurals folded. With join, a word split
// at such boundaries is also kept whole ("GitHub" -> git, hub, github), so it
// matches both spellings. With cjk, runs of Han, kana or Hangul become
// overlapping character bigrams ("八字信息" -> 八字, 字信, 信息).
func tokens(text string, cjk, join bool) []string {
	var out []string
	var cur, whole []rune
	parts := 0
	inCJK := false
	emit := func(w string) {
		// Single letters ("s" of "repository's") carry no meaning; digits do.
		if !stopWords[w] && (len(w) != 1 || w[0] < 'a' || w[0] > 'z') {
			out = append(out, stem(w))
		}
	}
	flush := func() {
		if len(cur) == 0 {
			return
		}
		if inCJK {
			if len(cur) == 1 {
				out = append(out, string(cur))
			}
			for i := 0; i+1 < len(cur); i++ {
				out = append(out, string(cur[i:i+2]))
			}
		} else {
			emit(strings.ToLower(string(cur)))
			parts++
		}
		cur = cur[:0]
	}
	endWord := func() {
		flush()
		if join && parts > 1 {
			emit(strings.ToLower(string(whole)))
		}
		whole, parts = whole[:0], 0
	}
	rs := []rune(text)
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			endWord()
			continue
		}
		if c := cjk && isCJK(r); c != inCJK {
			endWord()
			inCJK = c
		}
		if len(cur) > 0 && !inCJK {
			prev := cur[len(cur)-1]
			switch {
			case unicode.IsLower(prev) && unicode.IsUpper(r):
				flush()
			case unicode.IsUpper(prev) && unicode.IsUpper(r) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
				flush() // "HTTPServer" -> HTTP, Server
			case unicode.IsDigit(prev) != unicode.IsDigit(r):
				flush()
			}
		}
		cur = append(cur, r)
		if !inCJK {
			whole = append(whole, r)
		}
	}
	endWord()
	return out
}

func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

// stem folds simple English plurals so "files" finds "file".
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us"):
		return w[:len(w)-1]
	}
	return w
}

// stopWords are checked before plural folding ("this" is not "thi").
var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "and": true, "or": true, "of": true, "to": true,
	"in": true, "on": true, "for": true, "with": true, "by": true, "is": true, "are": true,
	"be": true, "this": true, "that": true, "it": true, "as": true, "at": true, "from": true,
	"i": true, "me": true, "my": true, "can": true, "you": true, "your": true, "will": true,
}
