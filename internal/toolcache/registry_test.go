package toolcache

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func mkTool(server, name string) Tool {
	return Tool{Server: server, Original: name, Name: name, InputSchema: json.RawMessage(`{"type":"object"}`), Parameters: json.RawMessage(`{"type":"object"}`)}
}

func TestAssignNames(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 70)
	tests := []struct {
		name  string
		tools []Tool
		want  []string // in input order
	}{
		{"unique names kept", []Tool{mkTool("a", "read"), mkTool("b", "write")}, []string{"read", "write"}},
		{"clash qualifies every owner", []Tool{mkTool("gh", "search"), mkTool("jira", "search"), mkTool("gh", "get")},
			[]string{"gh__search", "jira__search", "get"}},
		{"invalid characters", []Tool{mkTool("a", "files.read"), mkTool("a", "a  b/c")},
			[]string{"files_read", "a_b_c"}},
		// Non-ASCII names were "_" for every character run: "查询天气" and
		// "获取时间" were both "_" (then suffixed by server, so a job's
		// names changed with the catalog), "Café" was "Caf_".
		{"CJK names distinct and stable", []Tool{mkTool("a", "查询天气"), mkTool("a", "获取时间"), mkTool("a", "ユーザー")},
			[]string{"tool_" + shortHash("查询天气"), "tool_" + shortHash("获取时间"), "tool_" + shortHash("ユーザー")}},
		{"ASCII part kept", []Tool{mkTool("a", "天气_forecast v2"), mkTool("a", "погода-today")},
			[]string{"forecast_v2_" + shortHash("天气_forecast v2"), "today_" + shortHash("погода-today")}},
		{"accents transliterated", []Tool{mkTool("a", "Café_crème"), mkTool("a", "straße.größe"), mkTool("a", "Łódź søk"), mkTool("a", "ﬁle_Ａ²")},
			[]string{"Cafe_creme", "strasse_grosse", "Lodz_sok", "file_A2"}},
		{"CJK clash across servers", []Tool{mkTool("天气", "查询"), mkTool("时间", "查询")},
			[]string{"tool_" + shortHash("天气") + "__tool_" + shortHash("查询"), "tool_" + shortHash("时间") + "__tool_" + shortHash("查询")}},
		{"long CJK name", []Tool{mkTool("a", strings.Repeat("天", 100))}, []string{"tool_" + shortHash(strings.Repeat("天", 100))}},
		{"server names sanitised too", []Tool{mkTool("my server", "x"), mkTool("other.srv", "x")},
			[]string{"my_server__x", "other_srv__x"}},
		{"long name cut with hash", []Tool{mkTool("a", long)}, []string{strings.Repeat("x", 55) + "_" + shortHash("a\x00"+long)}},
		{"sanitised collision in one server", []Tool{mkTool("a", "get.item"), mkTool("a", "get_item")},
			[]string{"get_item_" + shortHash("a\x00get.item"), "get_item_" + shortHash("a\x00get_item")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tools := append([]Tool(nil), tc.tools...)
			assignNames(tools)
			for i, tool := range tools {
				if tool.Name != tc.want[i] {
					t.Errorf("tool %d (%s/%s) = %q, want %q", i, tool.Server, tool.Original, tool.Name, tc.want[i])
				}
				if !ValidName(tool.Name) {
					t.Errorf("%q is not a valid function name", tool.Name)
				}
			}
			// Predictable: the same names whatever order the servers came in.
			rev := append([]Tool(nil), tc.tools...)
			for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
				rev[i], rev[j] = rev[j], rev[i]
			}
			assignNames(rev)
			for i, tool := range rev {
				if want := tc.want[len(rev)-1-i]; tool.Name != want {
					t.Errorf("reversed order: %s/%s = %q, want %q", tool.Server, tool.Original, tool.Name, want)
				}
			}
		})
	}
}

func TestNormalizeSchema(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"q":{"type":"string"}}}`, `{"type":"object","properties":{"q":{"type":"string"}}}`},
		{`{"properties":{"a":{"type":"integer"}},"required":["a"]}`, `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`},
		{`{}`, `{"type":"object"}`},
		{`null`, `{"type":"object"}`},
		{``, `{"type":"object"}`},
		{`{ "type" : "object",  "additionalProperties" : false }`, `{"type":"object","additionalProperties":false}`},
		// Nested $schema is data, not the dialect marker: kept.
		{`{"type":"object","properties":{"$schema":{"type":"string"}}}`, `{"type":"object","properties":{"$schema":{"type":"string"}}}`},
	}
	for _, tc := range tests {
		got, err := NormalizeSchema(json.RawMessage(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("NormalizeSchema(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	if _, err := NormalizeSchema(json.RawMessage(`[1]`)); err == nil {
		t.Error("array schema accepted")
	}
}

func TestToolFromRawKeepsVerbatimSchema(t *testing.T) {
	t.Parallel()
	raw := `{"name":"q","title":"Query","description":"Run a query.","inputSchema":{"$schema":"https://json-schema.org/draft/2020-12/schema","properties":{"sql":{"type":"string"}}},
		"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true,"destructiveHint":false,"idempotentHint":true}}`
	tool, err := toolFromRaw("db", json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	if string(tool.InputSchema) != `{"$schema":"https://json-schema.org/draft/2020-12/schema","properties":{"sql":{"type":"string"}}}` {
		t.Errorf("InputSchema = %s", tool.InputSchema)
	}
	if string(tool.Parameters) != `{"type":"object","properties":{"sql":{"type":"string"}}}` {
		t.Errorf("Parameters = %s", tool.Parameters)
	}
	a := tool.Annotations
	if a.ReadOnlyHint == nil || !*a.ReadOnlyHint || a.DestructiveHint == nil || *a.DestructiveHint || a.IdempotentHint == nil || !*a.IdempotentHint || a.OpenWorldHint != nil {
		t.Errorf("annotations = %+v", a)
	}
	if tool.Server != "db" || tool.Original != "q" || tool.Title != "Query" || string(tool.OutputSchema) != `{"type":"object"}` {
		t.Errorf("tool = %+v", tool)
	}
}

func catalogPath(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "shared", "catalogs", name+".json")
	return p
}

func loadCatalogT(t *testing.T, name string) []Tool {
	t.Helper()
	_, tools, err := LoadCatalog(catalogPath(t, name))
	if err != nil {
		t.Skipf("catalog not available: %v", err)
	}
	return tools
}

func TestRegistryFromCatalogs(t *testing.T) {
	t.Parallel()
	live := loadCatalogT(t, "livemcptool-70servers")
	r := NewRegistry(live)
	if r.Count() != 527 {
		t.Fatalf("count = %d", r.Count())
	}
	qualified := 0
	for _, tool := range r.List() {
		if !ValidName(tool.Name) {
			t.Errorf("invalid name %q", tool.Name)
		}
		if strings.Contains(tool.Name, qualifySep) {
			qualified++
			if tool.Name != sanitizeName(tool.Server)+qualifySep+sanitizeName(tool.Original) {
				t.Errorf("qualified name %q for %s/%s", tool.Name, tool.Server, tool.Original)
			}
		}
		got, ok := r.Get(tool.Name)
		if !ok || got.Original != tool.Original || got.Server != tool.Server {
			t.Errorf("Get(%q) = %+v", tool.Name, got)
		}
	}
	// 13 names occur in more than one server (catalog note): each owner is qualified.
	if qualified < 26 {
		t.Errorf("%d qualified names, want every owner of the 13 shared names", qualified)
	}
	if !r.Has(r.Names()[0]) || r.Has("no_such_tool") {
		t.Error("Has wrong")
	}

	// Two catalogs together: names that clash across them are qualified.
	fs := loadCatalogT(t, "modelcontextprotocol-server-filesystem")
	ev := loadCatalogT(t, "modelcontextprotocol-server-everything")
	both := NewRegistry(fs, ev)
	if both.Count() != len(fs)+len(ev) {
		t.Errorf("count = %d", both.Count())
	}
}

func TestSearch(t *testing.T) {
	t.Parallel()
	gh := loadCatalogT(t, "github-mcp-server-all")
	live := loadCatalogT(t, "livemcptool-70servers")
	fs := loadCatalogT(t, "modelcontextprotocol-server-filesystem")
	r := NewRegistry(gh, live, fs)
	tests := []struct {
		query string
		want  string // must be in the top 3
	}{
		{"create an issue", "issue_write"},
		{"open a new pull request", "create_pull_request"},
		{"list pull requests", "list_pull_requests"},
		{"read text file", "read_text_file"},
		{"stock price", "get_current_stock_price"},
		{"directoryTree", "directory_tree"},
		{"merge pull request", "merge_pull_request"},
		{"get_file_info", "get_file_info"}, // exact name first
	}
	for _, tc := range tests {
		hits := r.Search(tc.query, 3)
		var names []string
		found := false
		for _, h := range hits {
			names = append(names, h.Name)
			if h.Original == tc.want {
				found = true
			}
		}
		if !found {
			t.Errorf("Search(%q) top 3 = %v, want %s", tc.query, names, tc.want)
		}
	}
	if hits := r.Search("get_file_info", 1); len(hits) != 1 || hits[0].Original != "get_file_info" {
		t.Errorf("exact name not first: %v", hits)
	}
	if hits := r.Search("zzzqqq", 5); len(hits) != 0 {
		t.Errorf("nonsense query matched %d tools", len(hits))
	}
	if hits := r.Search("file", 0); len(hits) != 10 {
		t.Errorf("default limit gave %d", len(hits))
	}
}

func TestTerms(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"list_pull_requests":      "list pull request",
		"getHTTPServerStatus":     "get http server status",
		"read-multiple-files":     "read multipl file", // Snowball stems
		"The repository's issues": "repositori issu",
		"npmVersions v2":          "npm version 2",
	} {
		if got := strings.Join(terms(in), " "); got != want {
			t.Errorf("terms(%q) = %q, want %q", in, got, want)
		}
	}
}

// The token counts of the shared catalogs in full form, as a sanity check
// against the catalogs' README. The README counted the same definitions with
// object keys sorted and "description": null for tools that have none; we
// count the bytes really sent (keys in the server's order), which comes out
// a little lower: within 1% for each catalog and in total.
func TestCatalogTokenCounts(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join("..", "..", "..", "shared", "catalogs", "*.json"))
	if len(files) == 0 {
		t.Skip("catalogs not available")
	}
	total := 0
	for _, f := range files {
		_, tools, err := LoadCatalog(f)
		if err != nil {
			t.Fatal(err)
		}
		// Verbatim: server names and schemas as captured, as the README counted.
		n, err := CountToolTokens(LLMTools(verbatim(tools)))
		if err != nil {
			t.Fatal(err)
		}
		total += n
		if filepath.Base(f) == "github-mcp-server-all.json" && !within1pc(n, 20475) {
			t.Errorf("github-mcp-server-all = %d tokens, README says 20,475", n)
		}
	}
	if !within1pc(total, 243663) {
		t.Errorf("all catalogs = %d tokens, README says 243,663", total)
	}
	t.Logf("all catalogs, full form: %d tokens", total)
}

func within1pc(got, want int) bool { return got*100 >= want*99 && got*100 <= want*101 }

func verbatim(tools []Tool) []Tool {
	out := make([]Tool, len(tools))
	for i, t := range tools {
		t.Name, t.Parameters = t.Original, t.InputSchema
		out[i] = t
	}
	return out
}

func TestCountToolTokens(t *testing.T) {
	t.Parallel()
	if n, err := CountToolTokens(nil); n != 0 || err != nil {
		t.Errorf("empty = %d, %v", n, err)
	}
	one := []Tool{{Name: "get_weather", Description: "Get the weather for a city.", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}}
	n, err := CountToolTokens(LLMTools(one))
	if err != nil || n < 20 || n > 60 {
		t.Errorf("one tool = %d, %v", n, err)
	}
	two, _ := CountToolTokens(LLMTools(append(one, one...)))
	if two <= n {
		t.Errorf("two tools = %d, one = %d", two, n)
	}
	if _, err := CountToolTokens(LLMTools([]Tool{{Name: "x", Parameters: json.RawMessage(`{bad`)}})); err == nil {
		t.Error("bad parameters accepted")
	}
}

func ExampleNewRegistry() {
	gh := []Tool{{Server: "github", Original: "search", Description: "Search code."}, {Server: "github", Original: "get_issue"}}
	jira := []Tool{{Server: "jira", Original: "search", Description: "Search tickets."}, {Server: "jira", Original: "issue.get"}}
	r := NewRegistry(gh, jira)
	for _, t := range r.List() {
		fmt.Printf("%s -> %s/%s\n", t.Name, t.Server, t.Original)
	}
	// Output:
	// get_issue -> github/get_issue
	// github__search -> github/search
	// issue_get -> jira/issue.get
	// jira__search -> jira/search
}
