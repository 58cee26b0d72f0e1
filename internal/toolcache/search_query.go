package toolcache

import (
	"cmp"
	"slices"
	"strings"

	"github.com/kljensen/snowball/english"
)

// The analysis of a request into the terms searched for.

// queryTerm is one term searched for: a word of the request, a synonym, a
// typo correction, an abbreviation or the word an entity (a path, a URL)
// stands for, with its weight.
type queryTerm struct {
	id int32
	w  float64
	// group is the request word (or entity) the term stands for:
	// with synMax a tool gets the best of a group's terms, not their sum
	// (a tool saying "get" and "fetch" is not twice as much about
	// fetching).
	group int32
	// primary: a word of the request itself (the weak-answer bar counts
	// these).
	primary bool
}

// analyzedQuery is a request's terms, ordered by group, how many distinct
// words it has, and the (stemmed) words no indexed tool has, which only
// SearchOptions.Extra tools can match.
type analyzedQuery struct {
	terms   []queryTerm
	words   int
	unknown map[string]bool
	// raw is each word group's first form as the request wrote it, stem
	// its analysis (Unmatched names the words).
	raw, stem []string
}

// maxQueryTerms bounds the request words searched for (see analyze).
const maxQueryTerms = 96

// maxQueryWords bounds the distinct words a request is analysed into: a
// request with a long pasted text is searched by its first 256 distinct
// words (each is stemmed, which costs about a microsecond).
const maxQueryWords = 256

// analyze turns a request into the terms searched for.
func (ix *SearchIndex) analyze(text string) analyzedQuery {
	p := &ix.p
	// Distinct words in their order (a long pasted text repeats most of
	// its words), stemmed once each; a stem is one group.
	var words, rawOf []string // by group: the stem, its first word
	seen := map[string]bool{}
	stemSeen := map[string]bool{}
	eachToken(text, p.cjk, p.join, func(w string) bool {
		if seen[w] || (p.qstop && queryStopWord(w)) {
			return true
		}
		if len(seen) == maxQueryWords {
			return false
		}
		seen[w] = true
		if s := ix.stemCached(w, false); !stemSeen[s] {
			stemSeen[s] = true
			words = append(words, s)
			rawOf = append(rawOf, w)
		}
		return true
	})
	var qs []queryTerm
	var unknown map[string]bool
	used := make(map[int32]bool, len(words))
	for g, w := range words {
		if id, ok := ix.vocab[w]; ok {
			qs = append(qs, queryTerm{id: id, w: 1, group: int32(g), primary: true})
			used[id] = true
		} else {
			if unknown == nil {
				unknown = map[string]bool{}
			}
			unknown[w] = true
		}
	}
	// A long request is searched by its maxQueryTerms rarest words: the
	// commonest add little to any tool's score and cost the most (the
	// longest postings).
	drop := map[int32]bool{}
	if len(qs) > maxQueryTerms {
		byIDF := slices.Clone(qs)
		slices.SortStableFunc(byIDF, func(a, b queryTerm) int {
			return cmp.Compare(len(ix.post[a.id]), len(ix.post[b.id]))
		})
		for _, q := range byIDF[maxQueryTerms:] {
			drop[q.group] = true
		}
		qs = slices.DeleteFunc(qs, func(q queryTerm) bool { return drop[q.group] })
	}
	next := int32(len(words)) // groups after the words: entities
	// What the request's paths and URLs stand for, unless it says so in
	// words.
	if p.entity > 0 {
		for _, w := range entityWords(text) {
			if id, ok := ix.vocab[ix.stemCached(w, false)]; ok && !used[id] {
				used[id] = true
				qs = append(qs, queryTerm{id: id, w: p.entity, group: next})
				next++
			}
		}
	}
	// Alternatives: synonyms and typo corrections, each in its word's
	// group, never a term of the request itself.
	var alts []queryTerm
	for g, w := range words {
		if drop[int32(g)] {
			continue
		}
		if p.syn > 0 {
			for _, s := range p.syns.of(w, p.stem) {
				if id, ok := ix.vocab[s]; ok && !used[id] {
					alts = append(alts, queryTerm{id: id, w: p.syn, group: int32(g)})
				}
			}
		}
		if _, known := ix.vocab[w]; !known && p.typo > 0 && len(w) >= 5 && isASCIIWord(w) {
			for _, id := range ix.typoMatches(w) {
				if !used[id] {
					alts = append(alts, queryTerm{id: id, w: p.typo, group: int32(g)})
				}
			}
		}
		if p.prefix > 0 {
			if id, ok := ix.namePrefix(rawOf[g]); ok && !used[id] {
				alts = append(alts, queryTerm{id: id, w: p.prefix, group: int32(g)})
			}
		}
	}
	if len(alts) > 0 {
		qs = append(qs, alts...)
		slices.SortStableFunc(qs, func(a, b queryTerm) int { return cmp.Compare(a.group, b.group) })
	}
	return analyzedQuery{terms: qs, words: len(words), unknown: unknown, raw: rawOf, stem: words}
}

// queryStopWord: words that say nothing about which tool a request needs.
// English function words (the Snowball stemmer's stop list, a published
// list, not derived from any catalog or request), the words of asking and
// politeness, and the syntax of URLs. They are dropped from requests only:
// a tool's text keeps them.
func queryStopWord(w string) bool {
	return english.IsStopWord(w) || askingWords[w]
}

// askingWords are how people phrase a request to an assistant ("could
// you please help me ...", "I want to ...", "tell me ..."), which any
// request may contain whatever tool it needs, and URL syntax (the scheme
// and "www": the host and path words stay).
var askingWords = map[string]bool{
	"please": true, "pls": true, "kindly": true, "thanks": true, "thank": true,
	"hi": true, "hello": true, "hey": true, "ok": true, "okay": true, "sure": true,
	"help": true, "could": true, "would": true, "might": true, "may": true,
	"must": true, "shall": true, "want": true, "wants": true, "wanted": true,
	"need": true, "needs": true, "needed": true, "like": true, "let": true,
	"lets": true, "tell": true, "know": true, "also": true, "really": true,
	"maybe": true, "perhaps": true, "something": true, "anything": true,
	"everything": true, "someone": true, "anyone": true, "thing": true,
	"things": true, "etc": true, "im": true, "ll": true, "ve": true, "re": true,
	"http": true, "https": true, "www": true,
}

// entityWords are the words a request's paths and URLs stand for: a URL
// ("https://...") is a "url", a file path ("/a/b", "~/x.txt", "C:\\x",
// "./notes.md") is a "file" and a "path", which is how tools name the
// parameters that take them.
func entityWords(text string) []string {
	url, path := false, false
	for i := 0; i < len(text) && (!url || !path); {
		for i < len(text) && isSpace(text[i]) {
			i++
		}
		j, slash := i, false
		for ; j < len(text) && !isSpace(text[j]); j++ {
			slash = slash || text[j] == '/' || text[j] == '\\'
		}
		if !slash { // both need one
			i = j
			continue
		}
		chunk := trimPunct(text[i:j])
		switch {
		case chunk == "":
		case strings.Contains(chunk, "://"):
			url = true
		case isPath(chunk):
			path = true
		}
		i = j
	}
	var out []string
	if url {
		out = append(out, "url")
	}
	if path {
		out = append(out, "file", "path")
	}
	return out
}

// trimPunct trims the quotes, brackets and punctuation a path or URL is
// written between in prose.
func trimPunct(s string) string {
	const cut = "\"'`()[]<>{},;:!?"
	for s != "" && strings.IndexByte(cut, s[0]) >= 0 {
		s = s[1:]
	}
	for s != "" && strings.IndexByte(cut, s[len(s)-1]) >= 0 {
		s = s[:len(s)-1]
	}
	return s
}

// isPath: an absolute, home-relative or dot-relative path with at least two
// separators or a file extension ("/usr/lib", "~/a.txt", "./b.md",
// "C:\\x\\y"); "/login" alone is a route as much as a path and does not
// count.
func isPath(s string) bool {
	rest := ""
	switch {
	case strings.HasPrefix(s, "~/"), strings.HasPrefix(s, "./"):
		rest = s[2:]
	case strings.HasPrefix(s, "../"):
		rest = s[3:]
	case strings.HasPrefix(s, "/"):
		rest = s[1:]
	case len(s) > 3 && s[1] == ':' && (s[2] == '\\' || s[2] == '/') && isASCIILetter(s[0]):
		rest = s[3:]
	default:
		return false
	}
	if rest == "" {
		return false
	}
	if strings.ContainsAny(rest, "/\\") {
		return true
	}
	dot := strings.LastIndexByte(rest, '.')
	return dot > 0 && dot < len(rest)-1 && isASCIILetter(rest[dot+1])
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// namePrefix finds the longest name word of 4 or more letters that begins
// w and is at least two letters shorter ("config" for "configuration"): an
// abbreviation, not an inflection (the stemmer has those).
func (ix *SearchIndex) namePrefix(w string) (int32, bool) {
	if !isASCIIWord(w) {
		return 0, false
	}
	for n := len(w) - 2; n >= 4; n-- {
		if id, ok := ix.vocab[w[:n]]; ok && ix.nameTerm[id] {
			return id, true
		}
	}
	return 0, false
}
