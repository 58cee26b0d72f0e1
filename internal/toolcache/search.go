package toolcache

import (
	"cmp"
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

	"github.com/kljensen/snowball/english"
)

// The tool search: BM25F over the fields of each tool (the server's own
// tool name, title, description, parameter names, parameter descriptions,
// server name), English words reduced by the Snowball (Porter2) stemmer,
// and server-level evidence: a server whose tools as a whole match the
// request lifts its tools. A request is analysed without English function
// words and the words of asking (search_query.go); its file paths and URLs
// add the words tools use for them ("file", "path", "url"); each word adds
// its synonyms from general software vocabulary (search_synonyms.go), the
// name words that abbreviate it ("config" for "configuration") and, when no
// tool has it, the name words one edit away; none of these weighs more
// than the word itself. One index is built per catalog version
// (Registry.Index) and shared by every job; a job's servers and allow/deny
// globs filter it (Filter) rather than rebuilding it. The choices and
// their figures are in docs/BENCHMARKS.md, "Tool search".

// Fields of a tool document.
const (
	fName = iota
	fTitle
	fDesc
	fParamName
	fParamDesc
	fServer
	numFields
)

// searchParams are the ranking choices. SearchIndex uses
// defaultSearchParams; search_eval_test.go scores alternatives.
type searchParams struct {
	// BM25 saturation.
	k1 float64
	// w are the BM25F field weights, b the per-field length normalisation.
	w, b [numFields]float64
	// stem applies the Snowball English stemmer to Latin-script words.
	stem bool
	// syn is the weight of a synonym of a query word (0: no expansion).
	syn float64
	// syns is the synonym list (nil: synonymGroups).
	syns *synTable
	// altCap gives a synonym or correction at most the IDF of the request
	// word it stands for.
	altCap bool
	// synMax gives a tool the best of a query word and its synonyms
	// (false: their sum).
	synMax bool
	// typo is the weight of a tool-name word one edit away from a query word
	// that is in no tool (0: off).
	typo float64
	// srv mixes in server-level evidence: a tool's score is multiplied by
	// 1 + srv * (its server's score / the best server's score).
	srv float64
	// srvAdd adds srvAdd * (best tool score) * (server score / best server
	// score) to every tool of a matching server, so that sibling tools of
	// the right server surface even when they share few words with the
	// request.
	srvAdd float64
	// cjk indexes runs of Han, kana and Hangul as overlapping bigrams.
	cjk bool
	// join also indexes a word split at case or digit changes whole.
	join bool
	// qstop drops English stop words and the words of asking ("please",
	// "could", "help") from a request (queryStopWord).
	qstop bool
	// entity is the weight of the words a request's file paths ("file",
	// "path") and URLs ("url") stand for (0: off).
	entity float64
	// prefix is the weight of a name word of 4 or more letters that begins
	// a longer request word ("config" in "configuration", "info" in
	// "information"): identifiers abbreviate by cutting words short (0:
	// off).
	prefix float64
}

// defaultSearchParams is what the index uses; chosen on the choosing half of
// the development set only (docs/BENCHMARKS.md).
var defaultSearchParams = searchParams{
	k1: 1.2,
	//    name title desc pname pdesc server
	w:    [numFields]float64{5, 1, 1, 1, 0.5, 2},
	b:    [numFields]float64{0.5, 0.5, 0.75, 0.5, 0.75, 0.3},
	stem: true, syn: 0.8, typo: 0.5, srv: 0.5,
	cjk: true, join: true,
	qstop: true, prefix: 0.5, entity: 1, altCap: true,
}

type posting struct {
	doc int32
	tf  float32 // BM25F pseudo-frequency: field-weighted, length-normalised
}

// SearchIndex is an immutable inverted index of one catalog version. It is
// safe for concurrent use.
type SearchIndex struct {
	p       searchParams
	version uint64
	tools   []Tool
	vocab   map[string]int32 // term -> id
	post    [][]posting      // by term id
	n       float64
	// exact maps a lower-cased Name or Original to its tools.
	exact map[string][]int32

	// Server-level documents: every tool's name, title and description
	// words and the server's name, per server.
	srvOf   []int32 // tool -> server id
	servers []string
	srvPost [][]posting // by term id (empty when the term is in no server doc)
	// srvTools lists each server's tools.
	srvTools [][]int32

	// typo: a name word with one letter deleted -> the name words it comes
	// from (a symmetric-delete index for edit distance 1).
	deletes map[string][]int32
	// nameTerm marks term ids that occur in some tool name.
	nameTerm []bool

	stems map[string]string // word -> stem, the build's cache (read-only after)
}

var indexVersion atomic.Uint64

// NewSearchIndex indexes tools as they are (names already final), e.g. a
// job's own tools beside the shared index. Registry.Index is the shared one.
func NewSearchIndex(tools []Tool) *SearchIndex {
	return buildSearchIndexWith(tools, defaultSearchParams)
}

func buildSearchIndexWith(tools []Tool, p searchParams) *SearchIndex {
	if p.syns == nil {
		p.syns = defaultSynonyms
	}
	p.syns.of("", p.stem) // the synonym table is built once, not by a search
	ix := &SearchIndex{
		p: p, version: indexVersion.Add(1), tools: tools,
		vocab: map[string]int32{}, exact: map[string][]int32{},
		n: float64(len(tools)), stems: map[string]string{},
		srvOf: make([]int32, len(tools)), deletes: map[string][]int32{},
	}
	type occ struct {
		term  int32
		field uint8
		n     float32
	}
	occs := make([][]occ, len(tools))
	lens := make([][numFields]float32, len(tools))
	var total [numFields]float64
	srvIDs := map[string]int32{}
	counts := map[int32]float32{}
	var buf []string
	for i := range tools {
		t := &tools[i]
		sid, ok := srvIDs[t.Server]
		if !ok {
			sid = int32(len(ix.servers))
			srvIDs[t.Server] = sid
			ix.servers = append(ix.servers, t.Server)
			ix.srvTools = append(ix.srvTools, nil)
		}
		ix.srvOf[i] = sid
		ix.srvTools[sid] = append(ix.srvTools[sid], int32(i))
		names, descs := params(t.InputSchema)
		texts := [numFields]string{
			fName: t.Original, fTitle: t.Title, fDesc: t.Description,
			fParamName: strings.Join(names, " "), fParamDesc: strings.Join(descs, "\n"), fServer: t.Server,
		}
		if texts[fName] == "" {
			texts[fName] = t.Name
		}
		for f, text := range texts {
			if text == "" {
				continue
			}
			clear(counts)
			buf = ix.analyzeInto(buf[:0], text, true)
			for _, w := range buf {
				id := ix.termID(w)
				counts[id]++
				if f == fName {
					ix.markName(id, w)
				}
			}
			lens[i][f] = float32(len(buf))
			total[f] += float64(len(buf))
			for id, c := range counts {
				occs[i] = append(occs[i], occ{id, uint8(f), c})
			}
		}
		name, orig := strings.ToLower(t.Name), strings.ToLower(t.Original)
		ix.exact[name] = append(ix.exact[name], int32(i))
		if orig != name && orig != "" {
			ix.exact[orig] = append(ix.exact[orig], int32(i))
		}
	}
	var avg [numFields]float64
	for f := range avg {
		avg[f] = 1
		if total[f] > 0 && len(tools) > 0 {
			avg[f] = total[f] / float64(len(tools))
		}
	}
	ix.post = make([][]posting, len(ix.vocab))
	ix.srvPost = make([][]posting, len(ix.vocab))
	// Server documents: raw counts of name, title, description and server
	// words over the server's tools, with their length.
	srvTF := make([]map[int32]float32, len(ix.servers))
	srvLen := make([]float64, len(ix.servers))
	for i := range srvTF {
		srvTF[i] = map[int32]float32{}
	}
	tf := map[int32]float32{}
	for i, os := range occs {
		clear(tf)
		for _, o := range os {
			norm := 1 - p.b[o.field] + p.b[o.field]*float64(lens[i][o.field])/avg[o.field]
			tf[o.term] += float32(p.w[o.field] * float64(o.n) / norm)
			if o.field == fName || o.field == fTitle || o.field == fDesc || o.field == fServer {
				s := ix.srvOf[i]
				if o.field == fServer {
					srvTF[s][o.term] = max(srvTF[s][o.term], o.n) // once per server, not per tool
				} else {
					srvTF[s][o.term] += o.n
				}
			}
		}
		for id, f := range tf {
			ix.post[id] = append(ix.post[id], posting{int32(i), f})
		}
	}
	srvTotal := 0.0
	for s, m := range srvTF {
		for _, c := range m {
			srvLen[s] += float64(c)
		}
		srvTotal += srvLen[s]
	}
	srvAvg := 1.0
	if srvTotal > 0 {
		srvAvg = srvTotal / float64(len(ix.servers))
	}
	for s, m := range srvTF {
		norm := 1 - 0.75 + 0.75*srvLen[s]/srvAvg
		for id, c := range m {
			ix.srvPost[id] = append(ix.srvPost[id], posting{int32(s), float32(float64(c) / norm)})
		}
	}
	return ix
}

func (ix *SearchIndex) termID(w string) int32 {
	id, ok := ix.vocab[w]
	if !ok {
		id = int32(len(ix.vocab))
		ix.vocab[w] = id
		ix.nameTerm = append(ix.nameTerm, false)
	}
	return id
}

// markName records a name word for typo tolerance (words of 4 or more
// letters: shorter ones are too close to too many).
func (ix *SearchIndex) markName(id int32, w string) {
	if ix.nameTerm[id] || ix.p.typo == 0 {
		ix.nameTerm[id] = true
		return
	}
	ix.nameTerm[id] = true
	if len(w) < 4 || !isASCIIWord(w) {
		return
	}
	for i := range len(w) {
		d := w[:i] + w[i+1:]
		ix.deletes[d] = append(ix.deletes[d], id)
	}
	ix.deletes[w] = append(ix.deletes[w], id)
}

// analyzeInto appends text's index terms to out. build says the stem cache
// may grow (only while building; searches only read it).
func (ix *SearchIndex) analyzeInto(out []string, text string, build bool) []string {
	eachToken(text, ix.p.cjk, ix.p.join, func(w string) bool {
		out = append(out, ix.stemCached(w, build))
		return true
	})
	return out
}

// stemCached is the analysis of one word (its stem, or its plural folded
// without the stemmer); build says the cache may grow.
func (ix *SearchIndex) stemCached(w string, build bool) string {
	if !ix.p.stem {
		return foldPlural(w)
	}
	s, ok := ix.stems[w]
	if !ok {
		s = stemWord(w)
		if build {
			ix.stems[w] = s
		}
	}
	return s
}

// stemWord is the Snowball English stem of a Latin-script word; other words
// are kept.
func stemWord(w string) string {
	if !isASCIIWord(w) {
		return w
	}
	return english.Stem(w, true)
}

func isASCIIWord(w string) bool {
	for i := 0; i < len(w); i++ {
		if c := w[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// Version is the catalog version the index was built for (increasing).
func (ix *SearchIndex) Version() uint64 { return ix.version }

// Len is the number of tools indexed.
func (ix *SearchIndex) Len() int { return len(ix.tools) }

// Filter is a subset of an index's tools (a job's servers and allow/deny
// globs), computed once per job and catalog version.
type Filter struct {
	ix    *SearchIndex
	allow []bool
}

// Filter keeps the tools for which keep is true.
func (ix *SearchIndex) Filter(keep func(Tool) bool) *Filter {
	f := &Filter{ix: ix, allow: make([]bool, len(ix.tools))}
	for i, t := range ix.tools {
		f.allow[i] = keep(t)
	}
	return f
}

func (f *Filter) ok(ix *SearchIndex, i int32) bool {
	return f == nil || f.ix != ix || f.allow[i]
}

// SearchOptions shape one search.
type SearchOptions struct {
	// Limit is the most hits returned (<= 0: 10).
	Limit int
	// Server keeps only the tools of this server (case-insensitive; "":
	// all).
	Server string
	// Filter keeps only a job's tools (nil: all).
	Filter *Filter
	// Extra are tools outside the index (a job's client tools and resource
	// bridge): scored with the index's statistics and merged into the
	// ranking.
	Extra []Tool
	// NoFallback returns no hits when no query word matches any tool,
	// instead of the closest names.
	NoFallback bool
}

// SearchHit is one ranked tool.
type SearchHit struct {
	Tool  Tool
	Score float64
}

// SearchResult is a search's answer, best first.
type SearchResult struct {
	Hits []SearchHit
	// Fallback: no query word matched any tool; Hits are the tools whose
	// names look most like the query (or simply the first tools).
	Fallback bool
	// Weak: the best hit matched only a small part of the query (a hint
	// to the model to search again with other words).
	Weak bool
	// UnknownServer: Server named no server of the index.
	UnknownServer bool
	// Unmatched are the words of a short query (a model's, not a whole
	// task: at most maxUnmatchedQueryWords words) that no tool searched
	// has, nor any of their synonyms or corrections ("email" in "send an
	// email" where no tool speaks of mail), lower-cased, at most
	// maxUnmatchedNamed: the hits match the rest, and a model should not
	// take them for what it asked. SemanticIndex.Search does not set it:
	// the vectors match beyond the words.
	Unmatched []string
	// SemanticErr: the query could not be embedded (SemanticIndex.Search),
	// so this is the BM25F ranking alone.
	SemanticErr error
}

var scratchPool sync.Pool

// scratch is one search's working memory, reused across searches (a
// search at 10,000 tools allocates almost nothing).
type scratch struct {
	scores []float64 // by tool
	alt    []float64 // by tool: a group's best alternative
	seen   []int32   // tools with an alt entry, servers with a grp entry
	srv    []float64 // by server
	grp    []float64 // by server: a group's best term
}

func getScratch(tools, servers int) *scratch {
	sc, _ := scratchPool.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	// alt and grp are left all zero by every search; scores and srv are
	// cleared here.
	grow := func(s []float64, n int, zero bool) []float64 {
		if cap(s) < n {
			return make([]float64, n)
		}
		s = s[:n]
		if zero {
			clear(s)
		}
		return s
	}
	sc.scores, sc.alt = grow(sc.scores, tools, true), grow(sc.alt, tools, false)
	sc.srv, sc.grp = grow(sc.srv, servers, true), grow(sc.grp, servers, false)
	return sc
}

// Search ranks the index's tools (and opts.Extra) for a free-text query.
func (ix *SearchIndex) Search(query string, opts SearchOptions) SearchResult {
	limit := opts.Limit
	if limit <= 0 {
		limit = 10
	}
	var res SearchResult
	srvWant := int32(-1)
	if opts.Server != "" {
		for s, name := range ix.servers {
			if strings.EqualFold(name, opts.Server) {
				srvWant = int32(s)
			}
		}
		if srvWant < 0 {
			res.UnknownServer = true
			if len(opts.Extra) == 0 {
				return res
			}
		}
	}
	q := ix.analyze(query)
	sc := getScratch(len(ix.tools), len(ix.servers))
	defer scratchPool.Put(sc)
	scores := sc.scores
	idfMass := ix.scoreTerms(q.terms, scores, sc)
	ix.serverEvidence(q.terms, scores, sc)
	// A query that is a tool's name (model-facing or the server's own)
	// puts that tool first.
	if len(query) <= maxNameBytes {
		for _, i := range ix.exact[strings.ToLower(strings.TrimSpace(query))] {
			scores[i] = math.Inf(1)
		}
	}
	keep := func(i int) bool {
		return scores[i] > 0 && opts.Filter.ok(ix, int32(i)) && (srvWant < 0 || ix.srvOf[i] == srvWant) && !res.UnknownServer
	}
	// The best limit hits, kept in a small heap: sorting every tool that
	// shares a word with a long request would cost more than the scoring.
	top := topK{limit: limit}
	for i, s := range scores {
		if keep(i) {
			top.push(&ix.tools[i], s)
		}
	}
	if len(opts.Extra) > 0 && opts.Server == "" {
		for i := range opts.Extra {
			if s := ix.scoreExtra(&opts.Extra[i], q, query); s > 0 {
				top.push(&opts.Extra[i], s)
			}
		}
	}
	hits := top.sorted()
	for _, h := range hits {
		res.Hits = append(res.Hits, SearchHit{Tool: *h.t, Score: h.score})
	}
	if len(res.Hits) > 0 {
		// Weak: the best tool's score is below a third of what a tool
		// matching every query word once in its name would get.
		top := res.Hits[0].Score
		res.Weak = !math.IsInf(top, 1) && idfMass > 0 && top < idfMass*(ix.p.k1+1)/3*weakShare(q.words)
		if !math.IsInf(top, 1) {
			res.Unmatched = ix.unmatched(q, opts, srvWant)
		}
		return res
	}
	if opts.NoFallback || res.UnknownServer {
		return res
	}
	res.Fallback = true
	res.Hits = ix.fallback(query, opts, srvWant, limit)
	return res
}

// unmatched lists the words of a short query that no tool the search
// covers (opts' filter and server, and opts.Extra) has, by itself or
// through an alternative of its group.
func (ix *SearchIndex) unmatched(q analyzedQuery, opts SearchOptions, srvWant int32) []string {
	if q.words > maxUnmatchedQueryWords || q.words < 2 {
		return nil // one word: the hits (or the fallback) answer for it
	}
	matched := make([]bool, q.words)
	for _, qt := range q.terms {
		g := int(qt.group)
		if g >= q.words || matched[g] {
			continue // an entity's words, or a group already matched
		}
		for _, po := range ix.post[qt.id] {
			if opts.Filter.ok(ix, po.doc) && (srvWant < 0 || ix.srvOf[po.doc] == srvWant) {
				matched[g] = true
				break
			}
		}
	}
	var extra map[string]bool
	var out []string
	for g, ok := range matched {
		if ok {
			continue
		}
		if extra == nil && len(opts.Extra) > 0 && opts.Server == "" {
			extra = map[string]bool{}
			for _, t := range opts.Extra {
				names, descs := params(t.InputSchema)
				for _, w := range ix.analyzeInto(nil, strings.Join(append([]string{t.Name, t.Title, t.Description, t.Server}, append(names, descs...)...), "\n"), false) {
					extra[w] = true
				}
			}
		}
		if extra[q.stem[g]] {
			continue
		}
		if len(out) == maxUnmatchedNamed {
			break
		}
		out = append(out, q.raw[g])
	}
	return out
}

// maxUnmatchedQueryWords bounds the queries whose unmatched words are
// named (a whole task's names and places match no tool and say nothing);
// maxUnmatchedNamed bounds the words named.
const (
	maxUnmatchedQueryWords = 12
	maxUnmatchedNamed      = 5
)

// maxNameBytes bounds the query looked up as a whole tool name.
const maxNameBytes = 256

// scoreTerms adds each tool's BM25F score for the query terms to scores: a
// group's terms (a word, its synonyms and corrections) are summed, or give
// their best with synMax. It returns the IDF mass of the request's own
// words.
func (ix *SearchIndex) scoreTerms(qs []queryTerm, scores []float64, sc *scratch) float64 {
	k1 := ix.p.k1
	idfMass := 0.0
	for gi := 0; gi < len(qs); {
		gj := gi + 1
		for gj < len(qs) && qs[gj].group == qs[gi].group {
			gj++
		}
		single := gj-gi == 1 || !ix.p.synMax
		// An alternative (synonym, correction) weighs no more than the word
		// itself: a rarer synonym would otherwise outscore the word the
		// request used ("txt" for "text").
		capIDF := math.Inf(1)
		for _, q := range qs[gi:gj] {
			ps := ix.post[q.id]
			idf := bm25IDF(ix.n, float64(len(ps)))
			if q.primary {
				idfMass += idf
				capIDF = idf
			} else if ix.p.altCap {
				idf = min(idf, capIDF)
			}
			c := idf * q.w * (k1 + 1)
			if single {
				for _, po := range ps {
					f := float64(po.tf)
					scores[po.doc] += c * f / (f + k1)
				}
				continue
			}
			for _, po := range ps {
				f := float64(po.tf)
				v := c * f / (f + k1)
				if sc.alt[po.doc] == 0 {
					sc.seen = append(sc.seen, po.doc)
				}
				sc.alt[po.doc] = max(sc.alt[po.doc], v)
			}
		}
		for _, d := range sc.seen {
			scores[d] += sc.alt[d]
			sc.alt[d] = 0
		}
		sc.seen = sc.seen[:0]
		gi = gj
	}
	return idfMass
}

// serverEvidence scores one document per server (its tools' names, titles
// and descriptions and its name) for the query and lifts each tool by its
// server's score relative to the best server's.
func (ix *SearchIndex) serverEvidence(qs []queryTerm, scores []float64, sc *scratch) {
	if (ix.p.srv <= 0 && ix.p.srvAdd <= 0) || len(ix.servers) < 2 {
		return
	}
	k1, ns := ix.p.k1, float64(len(ix.servers))
	srvScore, grp := sc.srv, sc.grp
	for gi := 0; gi < len(qs); {
		gj := gi + 1
		for gj < len(qs) && qs[gj].group == qs[gi].group {
			gj++
		}
		capIDF := math.Inf(1)
		for _, q := range qs[gi:gj] {
			ps := ix.srvPost[q.id]
			idf := bm25IDF(ns, float64(len(ps)))
			if q.primary {
				capIDF = idf
			} else if ix.p.altCap {
				idf = min(idf, capIDF)
			}
			c := idf * q.w * (k1 + 1)
			for _, po := range ps {
				f := float64(po.tf)
				v := c * f / (f + k1)
				if grp[po.doc] == 0 {
					sc.seen = append(sc.seen, po.doc)
				}
				if ix.p.synMax {
					grp[po.doc] = max(grp[po.doc], v)
				} else {
					grp[po.doc] += v
				}
			}
		}
		for _, s := range sc.seen {
			srvScore[s] += grp[s]
			grp[s] = 0
		}
		sc.seen = sc.seen[:0]
		gi = gj
	}
	best, bestTool := 0.0, 0.0
	for _, s := range srvScore {
		best = max(best, s)
	}
	if best == 0 {
		return
	}
	if ix.p.srvAdd > 0 {
		for _, s := range scores {
			bestTool = max(bestTool, s)
		}
	}
	for i, s := range scores {
		if rel := srvScore[ix.srvOf[i]] / best; rel > 0 {
			scores[i] = s*(1+ix.p.srv*rel) + ix.p.srvAdd*bestTool*rel
		}
	}
}

// weakShare lowers the bar for long requests, where no single tool is
// expected to match most words.
func weakShare(words int) float64 {
	if words <= 3 {
		return 1
	}
	return 3 / float64(words)
}

func bm25IDF(n, df float64) float64 {
	if df == 0 {
		return 0
	}
	return math.Log(1 + (n-df+0.5)/(df+0.5))
}

// typoMatches finds name words one edit (insertion, deletion, substitution
// or, by the delete pairs, most transpositions) away from w.
func (ix *SearchIndex) typoMatches(w string) []int32 {
	var out []int32
	add := func(ids []int32) {
		for _, id := range ids {
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	add(ix.deletes[w])
	for i := range len(w) {
		add(ix.deletes[w[:i]+w[i+1:]])
	}
	return out
}

// scoreExtra scores a tool outside the index with the index's statistics;
// request words no indexed tool has (a client tool's own vocabulary) count
// as words of one tool.
func (ix *SearchIndex) scoreExtra(t *Tool, q analyzedQuery, query string) float64 {
	if len(query) <= maxNameBytes && strings.EqualFold(strings.TrimSpace(query), t.Name) {
		return math.Inf(1)
	}
	names, descs := params(t.InputSchema)
	texts := [numFields]string{
		fName: t.Name, fTitle: t.Title, fDesc: t.Description,
		fParamName: strings.Join(names, " "), fParamDesc: strings.Join(descs, "\n"), fServer: t.Server,
	}
	tf := map[int32]float64{}
	own := map[string]float64{}
	for f, text := range texts {
		// No length normalisation: a field of ordinary length gets norm 1.
		for _, w := range ix.analyzeInto(nil, text, false) {
			if id, ok := ix.vocab[w]; ok {
				tf[id] += ix.p.w[f]
			} else if q.unknown[w] {
				own[w] += ix.p.w[f]
			}
		}
	}
	k1, s := ix.p.k1, 0.0
	for _, qt := range q.terms {
		f := tf[qt.id]
		if f == 0 {
			continue
		}
		s += bm25IDF(ix.n+1, float64(len(ix.post[qt.id]))+1) * qt.w * (k1 + 1) * f / (f + k1)
	}
	// Summed smallest first: in map order the last bit varied between
	// runs, and with it the order of tools that score alike.
	for _, f := range slices.Sorted(maps.Values(own)) {
		s += bm25IDF(ix.n+1, 1) * (k1 + 1) * f / (f + k1)
	}
	return s
}

// fallback ranks tools by how much their names look like the query
// (character trigrams), for a query none of whose words is in any tool;
// when nothing looks alike, the first tools by name.
func (ix *SearchIndex) fallback(query string, opts SearchOptions, srvWant int32, limit int) []SearchHit {
	q := trigrams(strings.ToLower(query))
	type hit struct {
		t     *Tool
		score float64
	}
	var hits, rest []hit
	consider := func(t *Tool) {
		s := 0.0
		if len(q) > 0 {
			// Jaccard-like overlap of the name's byte trigrams with the
			// query's, without building the name's set.
			name := " " + strings.ToLower(t.Name) + " "
			common, total := 0, 0
			for i := 0; i+3 <= len(name); i++ {
				total++
				if q[name[i:i+3]] {
					common++
				}
			}
			s = float64(common) / float64(len(q)+total-common)
		}
		if s > 0 {
			hits = append(hits, hit{t, s})
		} else if len(rest) < limit {
			rest = append(rest, hit{t, 0})
		}
	}
	for i := range ix.tools {
		if opts.Filter.ok(ix, int32(i)) && (srvWant < 0 || ix.srvOf[i] == srvWant) {
			consider(&ix.tools[i])
		}
	}
	if opts.Server == "" {
		for i := range opts.Extra {
			consider(&opts.Extra[i])
		}
	}
	slices.SortFunc(hits, func(a, b hit) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return strings.Compare(a.t.Name, b.t.Name)
	})
	slices.SortFunc(rest, func(a, b hit) int { return strings.Compare(a.t.Name, b.t.Name) })
	hits = append(hits, rest...)
	out := make([]SearchHit, 0, min(limit, len(hits)))
	for _, h := range hits[:min(limit, len(hits))] {
		out = append(out, SearchHit{Tool: *h.t, Score: h.score})
	}
	return out
}

// trigrams are the byte trigrams of s with word separators as spaces.
func trigrams(s string) map[string]bool {
	var b strings.Builder
	b.WriteByte(' ')
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte(' ')
		}
	}
	b.WriteByte(' ')
	p := b.String()
	out := map[string]bool{}
	for i := 0; i+3 <= len(p); i++ {
		if g := p[i : i+3]; strings.Count(g, " ") < 2 {
			out[g] = true
		}
	}
	return out
}

// topK keeps the limit best (tool, score) pairs: a min-heap on score, ties
// broken by name so the answer does not depend on the tools' order.
type topK struct {
	limit int
	h     []scored
}

type scored struct {
	t     *Tool
	score float64
}

// worse orders the heap: a is worse than b.
func worse(a, b scored) bool {
	if a.score != b.score {
		return a.score < b.score
	}
	return a.t.Name > b.t.Name
}

func (k *topK) push(t *Tool, s float64) {
	e := scored{t, s}
	if len(k.h) < k.limit {
		k.h = append(k.h, e)
		for i := len(k.h) - 1; i > 0; {
			p := (i - 1) / 2
			if !worse(k.h[i], k.h[p]) {
				break
			}
			k.h[i], k.h[p] = k.h[p], k.h[i]
			i = p
		}
		return
	}
	if !worse(k.h[0], e) {
		return
	}
	k.h[0] = e
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(k.h) && worse(k.h[l], k.h[m]) {
			m = l
		}
		if r < len(k.h) && worse(k.h[r], k.h[m]) {
			m = r
		}
		if m == i {
			break
		}
		k.h[i], k.h[m] = k.h[m], k.h[i]
		i = m
	}
}

// sorted returns the kept pairs, best first.
func (k *topK) sorted() []scored {
	out := slices.Clone(k.h)
	slices.SortFunc(out, func(a, b scored) int {
		if worse(a, b) {
			return 1
		}
		if worse(b, a) {
			return -1
		}
		return 0
	})
	return out
}

// params lists the top-level property names of a JSON Schema and their
// descriptions.
func params(schema json.RawMessage) (names, descs []string) {
	if len(schema) == 0 {
		return nil, nil
	}
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

// terms is the analysis of the search (words, then stems), without the
// whole forms of split words.
func terms(text string) []string {
	p := defaultSearchParams
	p.join = false
	ix := &SearchIndex{p: p}
	return ix.analyzeInto(nil, text, false)
}
