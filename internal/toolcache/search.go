package toolcache

import (
	"encoding/json"
	"math"
	"sort"
	"strings"
	"unicode"
)

// BM25 parameters (the usual defaults).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
	// nameWeight repeats name terms: a word in the name says more about a
	// tool than the same word in a long description.
	nameWeight = 3
)

type searchIndex struct {
	docs   []map[string]int // term frequencies per tool
	lens   []float64
	avgLen float64
	df     map[string]int
	names  map[string]int // lower-cased full name -> tool index
}

func buildSearchIndex(tools []Tool) *searchIndex {
	ix := &searchIndex{df: map[string]int{}, names: map[string]int{}}
	total := 0.0
	for i, t := range tools {
		tf := map[string]int{}
		n := 0
		add := func(terms []string, w int) {
			for _, term := range terms {
				tf[term] += w
				n += w
			}
		}
		add(terms(t.Name), nameWeight)
		if t.Original != t.Name {
			add(terms(t.Original), 1)
		}
		add(terms(t.Title), 1)
		add(terms(t.Description), 1)
		add(terms(strings.Join(paramNames(t.InputSchema), " ")), 1)
		for term := range tf {
			ix.df[term]++
		}
		ix.docs = append(ix.docs, tf)
		ix.lens = append(ix.lens, float64(n))
		total += float64(n)
		ix.names[strings.ToLower(t.Name)] = i
	}
	if len(tools) > 0 {
		ix.avgLen = total / float64(len(tools))
	}
	return ix
}

func (ix *searchIndex) search(tools []Tool, query string, limit int) []Tool {
	if limit <= 0 {
		limit = 10
	}
	q := terms(query)
	type hit struct {
		i     int
		score float64
	}
	var hits []hit
	N := float64(len(tools))
	for i, tf := range ix.docs {
		score := 0.0
		for _, term := range q {
			f := float64(tf[term])
			if f == 0 {
				continue
			}
			df := float64(ix.df[term])
			idf := math.Log(1 + (N-df+0.5)/(df+0.5))
			score += idf * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*ix.lens[i]/ix.avgLen))
		}
		if score > 0 {
			hits = append(hits, hit{i, score})
		}
	}
	// An exact tool name outranks everything.
	if i, ok := ix.names[strings.ToLower(strings.TrimSpace(query))]; ok {
		hits = append(hits, hit{i, math.Inf(1)})
	}
	sort.SliceStable(hits, func(a, b int) bool {
		if hits[a].score != hits[b].score {
			return hits[a].score > hits[b].score
		}
		return tools[hits[a].i].Name < tools[hits[b].i].Name
	})
	out := make([]Tool, 0, min(limit, len(hits)))
	seen := map[int]bool{}
	for _, h := range hits {
		if len(out) == limit {
			break
		}
		if seen[h.i] {
			continue
		}
		seen[h.i] = true
		out = append(out, tools[h.i])
	}
	return out
}

// paramNames lists the top-level property names of a JSON Schema.
func paramNames(schema json.RawMessage) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	return sortedKeys(s.Properties)
}

// terms splits text into lower-case search terms: on anything that is not a
// letter or digit, and at camelCase and letter/digit boundaries; common
// English stop words are dropped and plurals folded.
func terms(text string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) == 0 {
			return
		}
		w := stem(strings.ToLower(string(cur)))
		cur = cur[:0]
		// Single letters ("s" of "repository's") carry no meaning; digits do.
		if w != "" && !stopWords[w] && !(len(w) == 1 && w[0] >= 'a' && w[0] <= 'z') {
			out = append(out, w)
		}
	}
	rs := []rune(text)
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			continue
		}
		if len(cur) > 0 {
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
	}
	flush()
	return out
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

var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "and": true, "or": true, "of": true, "to": true,
	"in": true, "on": true, "for": true, "with": true, "by": true, "is": true, "are": true,
	"be": true, "this": true, "that": true, "it": true, "as": true, "at": true, "from": true,
	"i": true, "me": true, "my": true, "can": true, "you": true, "your": true, "will": true,
}
