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
