package toolcache

import "sync"

// synonymGroups are words that tool catalogs and their users use for the
// same thing: the verbs of CRUD and lookup APIs and the common objects they
// act on. They are general English and API vocabulary, not taken from any
// catalog. A query word adds its group's other words at a lower weight
// (searchParams.syn), so "fetch a ticket" finds get_issue without making
// "get" and "fetch" the same word in the index.
var synonymGroups = [][]string{
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

var (
	synOnce sync.Once
	synStem map[string][]string // stem -> other stems of its groups
	synRaw  map[string][]string // word (plural-folded) -> other words
)

func initSynonyms() {
	synStem, synRaw = map[string][]string{}, map[string][]string{}
	add := func(m map[string][]string, norm func(string) string) {
		for _, g := range synonymGroups {
			ws := make([]string, len(g))
			for i, w := range g {
				ws[i] = norm(w)
			}
			for _, a := range ws {
				for _, b := range ws {
					if a != b && !contains(m[a], b) {
						m[a] = append(m[a], b)
					}
				}
			}
		}
	}
	add(synStem, stemWord)
	add(synRaw, foldPlural)
}

func contains(s []string, w string) bool {
	for _, x := range s {
		if x == w {
			return true
		}
	}
	return false
}

// synonymsOf returns the other words of w's synonym groups, in the index's
// analysis (stems or plural-folded words).
func synonymsOf(w string, stemmed bool) []string {
	synOnce.Do(initSynonyms)
	if stemmed {
		return synStem[w]
	}
	return synRaw[w]
}
