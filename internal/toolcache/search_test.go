package toolcache

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in        string
		cjk, join bool
		want      string
	}{
		{"arXiv papers on GitHub", false, false, "ar xiv papers git hub"},
		{"arXiv papers on GitHub", false, true, "ar xiv arxiv papers git hub github"},
		{"get_github_trending", false, true, "get github trending"}, // separators do not join
		{"NCT04280705", false, true, "nct 04280705 nct04280705"},
		{"getHTTPServerStatus", false, true, "get http server status gethttpserverstatus"},
		{"获取八字信息", true, false, "获取 取八 八字 字信 信息"},
		{"获取八字信息", false, false, "获取八字信息"},
		{"的 x", true, false, "的"},
		{"八字 of a boy", true, true, "八字 boy"},
		{"mixed中文text", true, true, "mixed 中文 text"},
		{"This is it", false, false, ""}, // stop words dropped
		// Data is not words: 65+ letters and digits in a run, or 257+
		// bytes of ASCII without a space.
		{"id " + strings.Repeat("aB3", 22) + " ok", false, true, "id ok"},
		{"see " + strings.Repeat("ab/", 86) + " now", false, true, "see now"},
		{"see " + strings.Repeat("ab/", 85) + " now", false, false, "see " + strings.TrimSpace(strings.Repeat("ab ", 85)) + " now"},
		{strings.Repeat("长", 300), true, false, strings.TrimSpace(strings.Repeat("长长 ", 299))}, // not ASCII: text
	}
	for _, tc := range tests {
		if got := strings.Join(tokens(tc.in, tc.cjk, tc.join), " "); got != tc.want {
			t.Errorf("tokens(%q, cjk=%v, join=%v) = %q, want %q", tc.in, tc.cjk, tc.join, got, tc.want)
		}
	}
}

// Each of the search's choices, on a small catalog where only that choice
// finds the tool.
func TestSearchChoices(t *testing.T) {
	t.Parallel()
	schema := func(s string) json.RawMessage { return json.RawMessage(s) }
	r := NewRegistry(
		[]Tool{{Server: "arxiv", Original: "search_arxiv", Description: "Search preprints."}},
		[]Tool{{Server: "bazi", Original: "getBaziDetail", Description: "根据时间、性别来获取八字信息。"}},
		[]Tool{{Server: "weather", Original: "get_forecast", Description: "Forecast for a city."}},
		[]Tool{{Server: "maps", Original: "route", Description: "Plan a route.",
			InputSchema: schema(`{"type":"object","properties":{"mode":{"type":"string","description":"driving, walking or cycling"}}}`)}},
		[]Tool{{Server: "fs", Original: "write_file", Description: "Write a file."}},
		[]Tool{{Server: "desktop", Original: "write_file", Description: "Write a file."}},
		[]Tool{{Server: "docs", Original: "report_writer", Description: "Report report report."}},
		[]Tool{{Server: "notes", Original: "note_writer", Description: "Write notes into a notebook."}},
		[]Tool{{Server: "tracker", Original: "get_issue", Description: "Get an issue by number."}},
	)
	tests := []struct {
		query, want string // want: server/original of the first hit
		// off takes the choice back; then want must not come first.
		off func(*searchParams)
	}{
		{"find papers on arXiv", "arxiv/search_arxiv", func(p *searchParams) { p.join, p.syn = false, 0 }},
		{"What are the 八字 of a boy?", "bazi/getBaziDetail", func(p *searchParams) { p.cjk = false }},
		{"will it rain in Paris, what's the weather", "weather/get_forecast", func(p *searchParams) { p.w[fServer], p.srv, p.srvAdd, p.syn = 0, 0, 0, 0 }},
		{"directions for cycling", "maps/route", func(p *searchParams) { p.w[fParamDesc], p.syn = 0, 0 }},
		{"report report report: write notes in my notebook", "notes/note_writer", nil}, // a repeated query word counts once,
		{"fetch ticket 12", "tracker/get_issue", func(p *searchParams) { p.syn = 0 }},
		{"forcast", "weather/get_forecast", func(p *searchParams) { p.typo = 0 }},
		{"write_file", "desktop/write_file", nil}, // exact Original name; ties by Name
		{"fs__write_file", "fs/write_file", nil},  // exact model-facing name
	}
	first := func(hits []Tool) string {
		if len(hits) == 0 {
			return ""
		}
		return hits[0].Server + "/" + hits[0].Original
	}
	for _, tc := range tests {
		if got := first(r.Search(tc.query, 3)); got != tc.want {
			t.Errorf("Search(%q) first = %q, want %s", tc.query, got, tc.want)
		}
		if tc.off == nil {
			continue
		}
		p := defaultSearchParams
		tc.off(&p)
		tools := r.current().tools
		if got := first(toolsOf(buildSearchIndexWith(tools, p).Search(tc.query, SearchOptions{Limit: 3, NoFallback: true}))); got == tc.want {
			t.Errorf("Search(%q) finds %s first without the choice too", tc.query, got)
		}
	}
}

func toolsOf(res SearchResult) []Tool {
	out := make([]Tool, len(res.Hits))
	for i, h := range res.Hits {
		out[i] = h.Tool
	}
	return out
}

// The request-side choices (stop words, what paths and URLs stand for,
// abbreviations, synonyms capped at the word's IDF), each on a small
// catalog where only that choice puts the tool first.
func TestSearchQueryChoices(t *testing.T) {
	t.Parallel()
	schema := func(s string) json.RawMessage { return json.RawMessage(s) }
	r := NewRegistry(
		[]Tool{{Server: "support", Original: "help_center", Description: "Help and support articles."}},
		[]Tool{{Server: "kitchen", Original: "find_recipe", Description: "Find recipes by ingredient."}},
		[]Tool{{Server: "fs", Original: "write_file", Description: "Write content to disk.",
			InputSchema: schema(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}`)}},
		[]Tool{{Server: "notes", Original: "add_note", Description: "Add a note with a summary of the day."}},
		[]Tool{{Server: "api", Original: "get_spec", Description: "The OpenAPI document of a service."}},
		[]Tool{{Server: "api", Original: "list_services", Description: "Services and their APIs."}},
		[]Tool{{Server: "web", Original: "fetch_page", Description: "Fetch a web page as markdown.",
			InputSchema: schema(`{"type":"object","properties":{"url":{"type":"string"}}}`)}},
		[]Tool{{Server: "web", Original: "search_web", Description: "Search the web for a topic."}},
		[]Tool{{Server: "text", Original: "read_text_file", Description: "Read a text file."}},
		[]Tool{{Server: "text", Original: "count_words", Description: "Count the words of a text."}},
		[]Tool{{Server: "text", Original: "text_diff", Description: "Differences between two texts."}},
		[]Tool{{Server: "text", Original: "upper", Description: "Upper-case a text."}},
		[]Tool{{Server: "files", Original: "read_dir", Description: "Read a directory's entries."}},
		[]Tool{{Server: "files", Original: "read_lines", Description: "Read lines of a file."}},
		[]Tool{{Server: "net", Original: "fetch_txt", Description: "Fetch a txt record of a domain."}},
	)
	tests := []struct {
		query, want string
		off         func(*searchParams)
	}{
		{"Could you help me with ingredients?", "kitchen/find_recipe", func(p *searchParams) { p.qstop = false }},
		{"keep this summary in /tmp/out/today.md", "fs/write_file", func(p *searchParams) { p.entity = 0 }},
		{"what is on https://example.org/news today", "web/fetch_page", func(p *searchParams) { p.entity = 0 }},
		{"the API specification of the billing service", "api/get_spec", func(p *searchParams) { p.prefix = 0 }},
		{"read text", "text/read_text_file", func(p *searchParams) { p.altCap = false }},
	}
	first := func(res SearchResult) string {
		if len(res.Hits) == 0 {
			return ""
		}
		return res.Hits[0].Tool.Server + "/" + res.Hits[0].Tool.Original
	}
	tools := r.current().tools
	for _, tc := range tests {
		if got := first(r.Index().Search(tc.query, SearchOptions{Limit: 3})); got != tc.want {
			t.Errorf("Search(%q) first = %q, want %s", tc.query, got, tc.want)
		}
		p := defaultSearchParams
		tc.off(&p)
		if got := first(buildSearchIndexWith(tools, p).Search(tc.query, SearchOptions{Limit: 3, NoFallback: true})); got == tc.want {
			t.Errorf("Search(%q) finds %s first without the choice too", tc.query, got)
		}
	}
}

// search_tools always answers: a request with no word of any tool (or
// only words of asking) gets the closest names, marked Fallback; a good
// match is neither Fallback nor Weak; a request with pasted data is
// searched by its words.
func TestSearchAlwaysAnswers(t *testing.T) {
	t.Parallel()
	r := NewRegistry(
		[]Tool{{Server: "weather", Original: "get_weather", Description: "Current weather for a city."}},
		[]Tool{{Server: "maps", Original: "geocode", Description: "Coordinates of an address."}},
		[]Tool{{Server: "fs", Original: "read_file", Description: "Read a file."}},
	)
	ix := r.Index()
	for _, q := range []string{"qqqxyz", "Could you please help me?", ""} {
		res := ix.Search(q, SearchOptions{Limit: 2})
		if !res.Fallback || len(res.Hits) != 2 {
			t.Errorf("Search(%q): fallback %v, %d hits; want the closest names", q, res.Fallback, len(res.Hits))
		}
	}
	if res := ix.Search("weather in Paris", SearchOptions{}); res.Weak || res.Fallback {
		t.Errorf("a good match is marked weak %v / fallback %v", res.Weak, res.Fallback)
	}
	blob := strings.Repeat("iVBORw0KGgoAAAANSUhEUgAAAgAAAAIACAYAAAD0eNT6/+", 400)
	if res := ix.Search("What city is in this image? "+blob, SearchOptions{}); len(res.Hits) == 0 || res.Hits[0].Tool.Original != "get_weather" {
		t.Errorf("request with pasted data: %v", toolsOf(res))
	}
}

// A job's own tools (SearchOptions.Extra) are found by words no indexed
// tool has.
func TestSearchExtraOwnWords(t *testing.T) {
	t.Parallel()
	ix := NewRegistry([]Tool{{Server: "weather", Original: "get_weather", Description: "Current weather for a city."}}).Index()
	extra := []Tool{{Name: "lookup_order", Description: "Look up an order's status by its number."}}
	res := ix.Search("look up the status of an order", SearchOptions{Limit: 3, Extra: extra})
	if res.Fallback || len(res.Hits) == 0 || res.Hits[0].Tool.Name != "lookup_order" {
		t.Errorf("hits %v, fallback %v; want lookup_order first by its words", toolsOf(res), res.Fallback)
	}
}

// Extra tools whose own words score alike come in the same order each
// time (summed in map order, their scores' last bit varied between runs).
func TestSearchExtraOrderIsStable(t *testing.T) {
	t.Parallel()
	ix := NewRegistry([]Tool{{Server: "fs", Original: "read_file", Description: "Read a file."}}).Index()
	// The same four words, counted differently: equal scores.
	extra := []Tool{
		{Name: "xa", Description: "zorblax quuxify frobnicate frobnicate frobnicate wibble"},
		{Name: "xb", Description: "zorblax zorblax zorblax quuxify frobnicate wibble"},
		{Name: "xc", Description: "zorblax quuxify quuxify quuxify frobnicate wibble"},
		{Name: "xd", Description: "zorblax quuxify frobnicate wibble wibble wibble"},
	}
	for range 20 {
		res := ix.Search("zorblax quuxify frobnicate wibble", SearchOptions{Extra: extra})
		var names []string
		for _, h := range res.Hits {
			names = append(names, h.Tool.Name)
		}
		if got := strings.Join(names, " "); got != "xa xb xc xd" {
			t.Fatalf("hits %s, want the tools that tie by name", got)
		}
	}
}

// TestSearchUnmatched: the words of a short query that no tool searched
// has, nor a synonym or a correction of them, are named.
func TestSearchUnmatched(t *testing.T) {
	t.Parallel()
	ix := NewSearchIndex([]Tool{
		{Server: "chat", Name: "send_message", Original: "send_message", Description: "Send a chat message to a channel."},
		{Server: "mail", Name: "read_inbox", Original: "read_inbox", Description: "Read the mail inbox."},
		{Server: "sky", Name: "get_weather", Original: "get_weather", Description: "Current weather for a city."},
	})
	noMail := ix.Filter(func(t Tool) bool { return t.Server != "mail" })
	tests := []struct {
		name  string
		query string
		opts  SearchOptions
		want  string // the unmatched words, space-separated
	}{
		{"every word matched", "send a chat message", SearchOptions{}, ""},
		{"a synonym matched", "send an email", SearchOptions{}, ""}, // email ~ mail
		{"the job has no tool with it", "send an email", SearchOptions{Filter: noMail}, "email"},
		{"another server's tool has it", "send an email", SearchOptions{Server: "chat"}, "email"},
		{"words in no tool, lower-cased", "send Telegrams to Mars", SearchOptions{}, "telegrams mars"},
		{"a typo is corrected, not named", "weathr in Oslo", SearchOptions{}, "oslo"},
		{"a client tool has it", "send a telegram", SearchOptions{Extra: []Tool{{Name: "telegram_bot", Description: "Post to Telegram."}}}, ""},
		{"one word: the hits answer for it", "telegram", SearchOptions{}, ""},
		{"at most five named", "send zebra yak walrus vole urchin tapir", SearchOptions{}, "zebra yak walrus vole urchin"},
		{"a whole task says nothing", "send the report to Anna, Bob, Carla, Dan, Eve, Fay, Gus, Hal, Ida, Jo and Kim", SearchOptions{}, ""},
		{"an exact name", "send_message", SearchOptions{}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := ix.Search(tc.query, tc.opts)
			if got := strings.Join(res.Unmatched, " "); got != tc.want {
				t.Errorf("Search(%q).Unmatched = %q, want %q (hits %d)", tc.query, got, tc.want, len(res.Hits))
			}
		})
	}
}
