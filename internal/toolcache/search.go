package toolcache

import (
	"encoding/json"
	"math"
	"sort"
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
	// instead of Original at weight name (the first version's behaviour).
	qualifiedName bool
	// cjk indexes runs of Han, kana and Hangul as overlapping bigrams (these
	// scripts do not separate words with spaces).
	cjk bool
	// join also indexes a word split at case or digit changes whole.
	join bool
	// stop drops further terms after the tokeniser's own short list.
	stop map[string]bool
	// stem maps each term further after the tokeniser's plural folding.
	stem func(string) string
	// distinctQuery counts a term repeated in the query once.
	distinctQuery bool
	// serverMix adds this share of the score of the tool's server (all its
	// tools' text as one document) to the tool's: tools of the server that
	// fits the task rise together (cluster-based smoothing). Both scores are
	// scaled to a best of 1 first.
	serverMix float64
	// Pseudo-relevance feedback: add the fbTerms best terms of the fbDocs
	// top tools to the query at weight fbWeight, and search again.
	fbDocs, fbTerms int
	fbWeight        float64
}

// defaultSearchParams is what Registry.Search uses.
var defaultSearchParams = searchParams{
	k1: 1.2, b: 0.75,
	name: 3, server: 1, title: 1, desc: 1, paramName: 1, paramDesc: 1,
	cjk:           true,
	stop:          englishStopWords,
	stem:          stemLight,
	distinctQuery: true,
}

type posting struct {
	doc int32
	tf  float32
}

type searchIndex struct {
	p        searchParams
	postings map[string][]posting
	// norm is k1 * (1 - b + b*len/avgLen) per tool, the BM25 denominator
	// term that depends only on the tool.
	norm  []float64
	n     float64
	// The same for servers (each server's tools as one document), and each
	// tool's server.
	srv      *searchIndex
	serverOf []int32
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
	ix.norm = bm25Norms(lens, p)
	if p.serverMix > 0 {
		ix.buildServers(tools, lens)
	}
	return ix
}

func bm25Norms(lens []float64, p searchParams) []float64 {
	total := 0.0
	for _, l := range lens {
		total += l
	}
	avg := 1.0
	if total > 0 {
		avg = total / float64(len(lens))
	}
	norm := make([]float64, len(lens))
	for i, l := range lens {
		norm[i] = p.k1 * (1 - p.b + p.b*l/avg)
	}
	return norm
}

// buildServers indexes each server's tools as one document.
func (ix *searchIndex) buildServers(tools []Tool, lens []float64) {
	ids := map[string]int32{}
	ix.serverOf = make([]int32, len(tools))
	var slens []float64
	for i, t := range tools {
		id, ok := ids[t.Server]
		if !ok {
			id = int32(len(slens))
			ids[t.Server] = id
			slens = append(slens, 0)
		}
		ix.serverOf[i] = id
		slens[id] += lens[i]
	}
	srv := &searchIndex{p: ix.p, postings: map[string][]posting{}, n: float64(len(slens))}
	for term, ps := range ix.postings {
		tf := map[int32]float32{}
		for _, po := range ps {
			tf[ix.serverOf[po.doc]] += po.tf
		}
		sp := make([]posting, 0, len(tf))
		for id, f := range tf {
			sp = append(sp, posting{id, f})
		}
		srv.postings[term] = sp
	}
	srv.norm = bm25Norms(slens, ix.p)
	ix.srv = srv
}

// analyze turns text into index terms.
func (p searchParams) analyze(text string) []string {
	ts := tokens(text, p.cjk, p.join)
	out := ts[:0]
	for _, t := range ts {
		if p.stop[t] {
			continue
		}
		if p.stem != nil {
			t = p.stem(t)
		}
		out = append(out, t)
	}
	return out
}

func (ix *searchIndex) idf(term string) float64 {
	df := float64(len(ix.postings[term]))
	return math.Log(1 + (ix.n-df+0.5)/(df+0.5))
}

// score adds the BM25 scores of the weighted query terms to scores.
func (ix *searchIndex) score(q map[string]float64, scores []float64) {
	for term, w := range q {
		ps := ix.postings[term]
		if len(ps) == 0 {
			continue
		}
		idf := ix.idf(term) * w * (ix.p.k1 + 1)
		for _, po := range ps {
			f := float64(po.tf)
			scores[po.doc] += idf * f / (f + ix.norm[po.doc])
		}
	}
}

func (ix *searchIndex) queryTerms(query string) map[string]float64 {
	q := map[string]float64{}
	for _, t := range ix.p.analyze(query) {
		if ix.p.distinctQuery {
			q[t] = 1
		} else {
			q[t]++
		}
	}
	return q
}

// scale divides scores by their maximum.
func scale(scores []float64) {
	m := 0.0
	for _, s := range scores {
		m = max(m, s)
	}
	if m > 0 {
		for i := range scores {
			scores[i] /= m
		}
	}
}

type hit struct {
	i     int
	score float64
}

// ranked sorts the tools with a positive score, best first, ties by name.
func ranked(tools []Tool, scores []float64) []hit {
	var hits []hit
	for i, s := range scores {
		if s > 0 {
			hits = append(hits, hit{i, s})
		}
	}
	sort.Slice(hits, func(a, b int) bool {
		if hits[a].score != hits[b].score {
			return hits[a].score > hits[b].score
		}
		return tools[hits[a].i].Name < tools[hits[b].i].Name
	})
	return hits
}

func (ix *searchIndex) search(tools []Tool, query string, limit int) []Tool {
	if limit <= 0 {
		limit = 10
	}
	q := ix.queryTerms(query)
	scores := make([]float64, len(tools))
	ix.score(q, scores)
	if ix.p.fbDocs > 0 {
		ix.feedback(q, ranked(tools, scores), scores)
	}
	if ix.srv != nil {
		ss := make([]float64, int(ix.srv.n))
		ix.srv.score(q, ss)
		scale(scores)
		scale(ss)
		for i := range scores {
			scores[i] += ix.p.serverMix * ss[ix.serverOf[i]]
		}
	}
	// A query that is a tool's name (model-facing or the server's own)
	// puts that tool first.
	for _, i := range ix.exact[strings.ToLower(strings.TrimSpace(query))] {
		scores[i] = math.Inf(1)
	}
	hits := ranked(tools, scores)
	out := make([]Tool, 0, min(limit, len(hits)))
	for _, h := range hits[:min(limit, len(hits))] {
		out = append(out, tools[h.i])
	}
	return out
}

// feedback expands q with the terms that best characterise the top hits
// (weighted by their share of each tool's text and their idf) and adds the
// expansion's scores.
func (ix *searchIndex) feedback(q map[string]float64, hits []hit, scores []float64) {
	top := map[int32]bool{}
	for _, h := range hits[:min(ix.p.fbDocs, len(hits))] {
		top[int32(h.i)] = true
	}
	if len(top) == 0 {
		return
	}
	cand := map[string]float64{}
	for term, ps := range ix.postings {
		if _, ok := q[term]; ok {
			continue
		}
		for _, po := range ps {
			if top[po.doc] {
				cand[term] += float64(po.tf) / ix.norm[po.doc]
			}
		}
	}
	type tw struct {
		t string
		w float64
	}
	var ts []tw
	for t, w := range cand {
		ts = append(ts, tw{t, w * ix.idf(t)})
	}
	sort.Slice(ts, func(a, b int) bool {
		if ts[a].w != ts[b].w {
			return ts[a].w > ts[b].w
		}
		return ts[a].t < ts[b].t
	})
	exp := map[string]float64{}
	for _, t := range ts[:min(ix.p.fbTerms, len(ts))] {
		exp[t.t] = ix.p.fbWeight
	}
	ix.score(exp, scores)
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

// terms is the word split of the default search (without the joined forms
// of compound words).
func terms(text string) []string { return tokens(text, defaultSearchParams.cjk, false) }

// tokens splits text into lower-case search terms: on anything that is not a
// letter or digit, and at camelCase and letter/digit boundaries; common
// English stop words are dropped and plurals folded. With join, a word split
// at such boundaries is also kept whole ("GitHub" -> git, hub, github), so it
// matches both spellings. With cjk, runs of Han, kana or Hangul become
// overlapping character bigrams.
func tokens(text string, cjk, join bool) []string {
	var out []string
	var cur, whole []rune
	parts := 0
	inCJK := false
	emit := func(w string) {
		// Single letters ("s" of "repository's") carry no meaning; digits do.
		if !stopWords[w] && !(len(w) == 1 && w[0] >= 'a' && w[0] <= 'z') {
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

// stemLight also conflates -ing, -ed and a final e, as in create, creates,
// created, creating -> creat. It runs on plural-folded terms. Like any
// suffix stripper it conflates a few unrelated words; it never produces a
// stem shorter than three letters or one without a vowel ("string" stays).
func stemLight(w string) string {
	if w == "" || w[0] > unicode.MaxASCII {
		return w
	}
	for _, suf := range [...]string{"ing", "ed"} {
		s, ok := strings.CutSuffix(w, suf)
		if !ok || len(s) < 3 || !strings.ContainsAny(s, "aeiouy") || (suf == "ed" && s[len(s)-1] == 'e') {
			continue
		}
		// "mapping" -> "mapp" -> "map"; "install" keeps its double l.
		if n := len(s); s[n-1] == s[n-2] && !strings.ContainsRune("aeioulsz", rune(s[n-1])) {
			s = s[:n-1]
		}
		w = s
		break
	}
	if len(w) > 3 && w[len(w)-1] == 'e' {
		w = w[:len(w)-1]
	}
	return w
}

var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "and": true, "or": true, "of": true, "to": true,
	"in": true, "on": true, "for": true, "with": true, "by": true, "is": true, "are": true,
	"be": true, "this": true, "that": true, "it": true, "as": true, "at": true, "from": true,
	"i": true, "me": true, "my": true, "can": true, "you": true, "your": true, "will": true,
}

// englishStopWords is NLTK's English stop-word list (function words only).
var englishStopWords = stopSet(`i me my myself we our ours ourselves you you're you've
you'll you'd your yours yourself yourselves he him his himself she she's her hers
herself it it's its itself they them their theirs themselves what which who whom
this that that'll these those am is are was were be been being have has had having
do does did doing a an the and but if or because as until while of at by for with
about against between into through during before after above below to from up down
in out on off over under again further then once here there when where why how all
any both each few more most other some such no nor not only own same so than too
very s t can will just don don't should should've now d ll m o re ve y ain aren
aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven
haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't
shouldn shouldn't wasn wasn't weren weren't won won't wouldn wouldn't`)

// stopSet holds the words of a list as the tokeniser emits them: split at
// apostrophes, plurals folded ("ours" -> "our").
func stopSet(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.FieldsFunc(words, func(r rune) bool { return r == '\'' || unicode.IsSpace(r) }) {
		m[stem(w)] = true
	}
	return m
}
