package toolcache

import (
	"slices"
	"sync"
)

// synonymGroups are words that software, its APIs and their users use for
// the same thing. Every group is general English or software vocabulary,
// written from what tool catalogs and programmers call things, not from
// any catalog's or request's wording: the verbs of CRUD and I/O APIs, the
// objects those APIs act on, the abbreviations identifiers use, and the
// names of file formats. A request word adds its groups' other words at a
// lower weight (searchParams.syn), so "fetch a ticket" finds get_issue
// without making "get" and "fetch" one word in the index. Topic words
// (places, prices, news, travel, food, ...) are deliberately left out:
// whether "hotel" should find "lodging" depends on the catalog, and a
// list of them tuned on a development set does not carry over.
var synonymGroups = [][]string{
	// Verbs of APIs: what one operation is called by different APIs.
	{"get", "fetch", "read", "retrieve", "obtain", "load"},     // return something that exists
	{"create", "add", "new", "insert", "make", "generate"},     // bring something into being
	{"delete", "remove", "erase", "destroy", "drop", "unlink"}, // the reverse
	{"update", "edit", "modify", "change", "patch"},            // alter in place
	{"list", "search", "find", "query", "browse", "enumerate", "lookup"},
	{"write", "save", "store"}, // persist
	{"send", "post", "publish", "submit"},
	{"run", "execute", "exec", "launch", "start", "invoke"},
	{"stop", "kill", "terminate", "halt", "cancel", "abort"},
	{"show", "display", "view", "describe", "detail", "info", "information"},
	{"download", "fetch"},
	{"upload", "attach"},
	{"convert", "transform", "export"},
	{"summary", "summarize", "overview"},
	{"screenshot", "capture"},
	{"click", "press", "tap"}, // UI automation
	// Objects those APIs act on.
	{"issue", "ticket", "bug"},
	{"repo", "repository"},
	{"directory", "folder", "dir"},
	{"file", "document", "doc"},
	{"message", "msg"},
	{"email", "mail"},
	{"image", "picture", "photo", "img"},
	{"chart", "graph", "plot", "diagram", "visualization", "visualize"},
	{"table", "spreadsheet", "sheet"},
	{"database", "db"},
	{"user", "account", "profile"},
	{"url", "link", "website", "webpage", "page", "site"},
	{"comment", "reply"},
	// Abbreviations in identifiers.
	{"config", "configuration", "settings"},
	{"env", "environment"},
	{"app", "application"},
	{"stats", "statistics"},
	{"auth", "authentication", "authenticate"},
	{"pkg", "package"},
	{"lib", "library"},
	{"func", "function"},
	{"param", "parameter"},
	{"arg", "argument"},
	{"desc", "description"},
	// File formats and what they are.
	{"md", "markdown"},
	{"pptx", "ppt", "powerpoint", "presentation", "slides"},
	{"xlsx", "xls", "excel", "spreadsheet"},
	{"docx", "doc", "document"},
	{"txt", "text"},
	{"png", "jpg", "jpeg", "gif", "webp", "image"},
	{"mp3", "wav", "audio"},
	{"mp4", "video"},
}

// synTable is a synonym list in both analyses.
type synTable struct {
	groups [][]string
	once   sync.Once
	stem   map[string][]string // stem -> other stems of its groups
	raw    map[string][]string // word (plural-folded) -> other words
}

var defaultSynonyms = &synTable{groups: synonymGroups}

func (t *synTable) init() {
	t.stem, t.raw = map[string][]string{}, map[string][]string{}
	add := func(m map[string][]string, norm func(string) string) {
		for _, g := range t.groups {
			ws := make([]string, len(g))
			for i, w := range g {
				ws[i] = norm(w)
			}
			for _, a := range ws {
				for _, b := range ws {
					if a != b && !slices.Contains(m[a], b) {
						m[a] = append(m[a], b)
					}
				}
			}
		}
	}
	add(t.stem, stemWord)
	add(t.raw, foldPlural)
}

// of returns the other words of w's synonym groups, in the index's
// analysis (stems or plural-folded words).
func (t *synTable) of(w string, stemmed bool) []string {
	t.once.Do(t.init)
	if stemmed {
		return t.stem[w]
	}
	return t.raw[w]
}
