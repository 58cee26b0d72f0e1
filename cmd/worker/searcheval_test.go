package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jetagent/jetagent/internal/toolcache"
)

func TestSearchEval(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	weather := write("weather.json", `{"server":"weather","tools":[{"name":"get_forecast","description":"Weather forecast for a city.","inputSchema":{"type":"object","properties":{"city":{"type":"string"}}}},{"name":"get_alerts","description":"Storm alerts."}]}`)
	files := write("files.json", `{"tools":[{"name":"read_file","description":"Read a file."}]}`)
	queries := write("q.jsonl", `{"id":"1","query":"will it rain in Paris tomorrow? forecast please","gold_tools":["get_forecast"],"gold":[{"tool":"get_forecast","servers":["weather"]}]}
{"id":"2","query":"show me the text of notes.txt","gold_tools":["read_file"],"acceptable_alternatives":["get_alerts"]}
{"id":"3","query":"no gold here","gold_tools":[]}
`)
	tests := []struct {
		name string
		args []string
		want func(t *testing.T, out string)
	}{
		{"json", []string{"--json", "--k", "1,5", queries, weather, files}, func(t *testing.T, out string) {
			var m map[string]float64
			if err := json.Unmarshal([]byte(out), &m); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if m["items"] != 2 || m["recall@5"] != 1 || m["hit@5"] != 1 || m["p99_us"] <= 0 {
				t.Errorf("got %s", out)
			}
			if _, ok := m["recall@10"]; ok {
				t.Errorf("recall@10 without --k 10: %s", out)
			}
		}},
		{"text, flags after the files", []string{queries, weather, files, "--k", "1"}, func(t *testing.T, out string) {
			if !strings.Contains(out, "2 items with gold tools, 3 tools in 2 catalog files") {
				t.Errorf("got %s", out)
			}
		}},
	}
	// --half keeps the items of one fixed half.
	inHalf := map[int]float64{}
	for _, id := range []string{"1", "2"} {
		inHalf[toolcache.EvalHalf(toolcache.EvalItem{ID: id})]++
	}
	for h, name := range []string{"choose", "report"} {
		tests = append(tests, struct {
			name string
			args []string
			want func(t *testing.T, out string)
		}{"half " + name, []string{"--json", "--half", name, queries, weather, files}, func(t *testing.T, out string) {
			var m map[string]float64
			if err := json.Unmarshal([]byte(out), &m); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if m["items"] != inHalf[h] {
				t.Errorf("--half %s: %v items, want %v: %s", name, m["items"], inHalf[h], out)
			}
		}})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out, errb bytes.Buffer
			if code := run(append([]string{"search-eval"}, tc.args...), &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			tc.want(t, out.String())
		})
	}
	var out, errb bytes.Buffer
	if code := run([]string{"search-eval", "--half", "both", queries, files}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "want choose or report") {
		t.Errorf("--half both: exit %d, %s", code, errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"search-eval", queries}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "at least one catalog") {
		t.Errorf("no catalog: exit %d, %s", code, errb.String())
	}
	// The files in the wrong order: the catalog read as the queries said
	// only "weather.json line 1: ..." before.
	out.Reset()
	errb.Reset()
	pretty := write("pretty.json", "{\n  \"server\": \"weather\",\n  \"tools\": []\n}\n")
	if code := run([]string{"search-eval", pretty, queries}, &out, &errb); code == 0 ||
		!strings.Contains(errb.String(), `search-eval: queries file (the first file: one {"query", "gold_tools"} a line): `) {
		t.Errorf("files swapped: exit %d, %s", code, errb.String())
	}
	// Nothing to measure is refused, not answered with zeros: a file with
	// no item that has gold tools, and catalogs without tools.
	for _, tc := range []struct{ name, queries, catalog, want string }{
		{"empty queries file", write("empty.jsonl", ""), weather, "no item with gold tools (0 items read): nothing to measure"},
		{"no gold", write("nogold.jsonl", `{"query":"x","gold_tools":[]}`+"\n"), weather, "no item with gold tools (1 items read)"},
		{"no tools", queries, pretty, "the catalog files hold no tools (" + pretty + "): nothing to search"},
	} {
		out.Reset()
		errb.Reset()
		if code := run([]string{"search-eval", "--json", tc.queries, tc.catalog}, &out, &errb); code == 0 || out.Len() != 0 ||
			!strings.Contains(errb.String(), tc.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", tc.name, code, out.String(), errb.String())
		}
	}
	// Two captures of one server: its tools are indexed once (the first
	// file's), so that the catalog has 3 tools, not 4, and a note says so.
	out.Reset()
	errb.Reset()
	again := write("weather-again.json", `{"server":"weather","tools":[{"name":"get_alerts","description":"Severe weather alerts."}]}`)
	if code := run([]string{"search-eval", "--k", "1", queries, weather, again, files}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "3 tools in 3 catalog files") ||
		!strings.Contains(errb.String(), `1 tools of server "weather" in `+again+` are in an earlier catalog already`) {
		t.Errorf("a server twice: exit %d, stdout %s, stderr %s", code, out.String(), errb.String())
	}
	// Definitions the pool would leave out of a server's tools/list (no
	// name, a schema that is no object, a name given again) are left out
	// here too, with a note, rather than refusing the file.
	out.Reset()
	errb.Reset()
	broken := write("broken.json", `{"server":"broken","tools":[{"name":"read_file","description":"Read a file."},`+
		`{"name":"read_file","description":"again"},{"description":"no name"},{"name":"bad","inputSchema":"string"}]}`)
	if code := run([]string{"search-eval", "--k", "1", queries, weather, broken}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "3 tools in 2 catalog files") ||
		!strings.Contains(errb.String(), "3 tool definitions in "+broken+" left out, as the worker would: "+
			`tools[1]: tool "read_file": its server gave that name before; tools[2]: tool definition without a name; `+
			`tools[3]: tool "bad": inputSchema: schema is not a JSON object`) {
		t.Errorf("broken definitions: exit %d, stdout %s, stderr %s", code, out.String(), errb.String())
	}
	// --misses lists on stderr the gold tools not in the first k, under
	// their item, and leaves the JSON on stdout as it is.
	out.Reset()
	errb.Reset()
	storm := write("storm.jsonl", `{"id":"s1","query":"will it rain in Paris tomorrow? forecast please","gold_tools":["get_forecast"]}
{"id":"s2","query":"storm warnings for Texas","gold_tools":["get_forecast","get_alerts"]}
`)
	if code := run([]string{"search-eval", "--json", "--misses", "--k", "1", storm, weather}, &out, &errb); code != 0 || !json.Valid(out.Bytes()) ||
		errb.String() != "search-eval: 1 gold tools not in the first 1:\n  s2: storm warnings for Texas\n    get_forecast: not in the first 100\n" {
		t.Errorf("--misses: exit %d, stdout %s, stderr %q", code, out.String(), errb.String())
	}
	misses := toolcache.EvalMisses(func(string, int) []toolcache.Tool { return nil },
		[]toolcache.EvalItem{{Query: "q", Gold: []toolcache.EvalTool{{Tool: "a"}}}, {Query: "none"}}, 10)
	if len(misses) != 1 || misses[0].Item != "item 1" || misses[0].Rank != 0 {
		t.Errorf("EvalMisses: %+v", misses)
	}
	// A catalog left out: still scored, with a warning naming the gold
	// tools no catalog has.
	out.Reset()
	errb.Reset()
	if code := run([]string{"search-eval", "--json", queries, files}, &out, &errb); code != 0 ||
		!strings.Contains(errb.String(), "1 gold tools are in no catalog given: weather/get_forecast") || !json.Valid(out.Bytes()) {
		t.Errorf("catalog left out: exit %d, stdout %s, stderr %s", code, out.String(), errb.String())
	}
}

// --embed-model measures the hybrid ranking against the endpoint of
// OPENAI_BASE_URL (here a scripted /v1/embeddings server); an endpoint
// that refuses fails the evaluation instead of measuring BM25F alone.
func TestSearchEvalEmbeddings(t *testing.T) {
	var refuse atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
			Model string   `json:"model"`
		}
		if refuse.Load() || r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil || req.Model != "toy" {
			http.Error(w, `{"error":{"message":"no"}}`, http.StatusBadRequest)
			return
		}
		type item struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		}
		var data []item
		for i, in := range req.Input {
			// One dimension per topic word: "rain" and "forecast" are one
			// topic, so the vectors see what the words do not.
			in = strings.ToLower(in)
			data = append(data, item{i, []float64{
				float64(strings.Count(in, "rain") + strings.Count(in, "forecast")),
				float64(strings.Count(in, "file")), 0.01}})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
	}))
	t.Cleanup(srv.Close)
	t.Setenv("OPENAI_BASE_URL", srv.URL+"/v1")
	t.Setenv("OPENAI_API_KEY", "sk-test")
	dir := t.TempDir()
	cat := filepath.Join(dir, "c.json")
	q := filepath.Join(dir, "q.jsonl")
	if err := os.WriteFile(cat, []byte(`{"server":"s","tools":[{"name":"get_forecast","description":"Weather forecast."},{"name":"read_file","description":"Read a file."}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(q, []byte(`{"id":"1","query":"will it rain","gold_tools":["get_forecast"]}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"search-eval", "--json", "--k", "1", "--embed-model", "toy", q, cat}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var m map[string]float64
	if err := json.Unmarshal(out.Bytes(), &m); err != nil || m["recall@1"] != 1 || m["semantic_fallbacks"] != 0 {
		t.Errorf("hybrid: %v %s", err, out.String())
	}
	// --embed-weight is the vector ranking's weight; out of range it is
	// refused before anything is embedded.
	out.Reset()
	if code := run([]string{"search-eval", "--json", "--k", "1", "--embed-model", "toy", "--embed-weight", "0.5", q, cat}, &out, &errb); code != 0 || !json.Valid(out.Bytes()) {
		t.Errorf("--embed-weight 0.5: exit %d, %s %s", code, out.String(), errb.String())
	}
	for _, w := range []string{"0", "-1", "101", "NaN"} {
		errb.Reset()
		if code := run([]string{"search-eval", "--embed-model", "toy", "--embed-weight", w, q, cat}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "--embed-weight") {
			t.Errorf("--embed-weight %s: exit %d, %s", w, code, errb.String())
		}
	}
	errb.Reset()
	if code := run([]string{"search-eval", "--embed-weight", "0.5", q, cat}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "--embed-model") {
		t.Errorf("--embed-weight without --embed-model: exit %d, %s", code, errb.String())
	}
	refuse.Store(true)
	out.Reset()
	if code := run([]string{"search-eval", "--embed-model", "toy", q, cat}, &out, &errb); code == 0 || !strings.Contains(errb.String(), "embedding") {
		t.Errorf("refusing endpoint: exit %d, %s", code, errb.String())
	}
}

// --k is read sorted and each cut-off once: "--k 1,1" printed "recall@1"
// twice in one JSON object.
func TestSearchEvalKs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		list string
		want []int // nil: refused
	}{
		{"1,5,10", []int{1, 5, 10}},
		{"1,1", []int{1}},
		{"10, 1,5,1,10", []int{1, 5, 10}},
		{"3", []int{3}},
		{"0", nil},
		{"1,,2", nil},
		{"a", nil},
	} {
		t.Run(tc.list, func(t *testing.T) {
			t.Parallel()
			got, err := parseKs(tc.list)
			if tc.want == nil {
				if err == nil {
					t.Errorf("accepted: %v", got)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		cat := filepath.Join(dir, "c.json")
		q := filepath.Join(dir, "q.jsonl")
		if err := os.WriteFile(cat, []byte(`{"server":"s","tools":[{"name":"read_file","description":"Read a file."}]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(q, []byte(`{"id":"1","query":"read a file","gold_tools":["read_file"]}`+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		if code := run([]string{"search-eval", "--json", "--k", "5,1,1,5", q, cat}, &out, &errb); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		dec := json.NewDecoder(&out)
		if _, err := dec.Token(); err != nil { // {
			t.Fatal(err)
		}
		var keys []string
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k.(string))
			if _, err := dec.Token(); err != nil { // the value, a number
				t.Fatal(err)
			}
		}
		want := []string{"items", "recall@1", "recall@5", "hit@1", "hit@5", "p50_us", "p99_us"}
		if !slices.Equal(keys, want) {
			t.Errorf("keys %v, want %v", keys, want)
		}
	})
}

// evalFiles writes name -> text into a new directory and returns the
// paths by name.
func evalFiles(t *testing.T, files map[string]string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	paths := map[string]string{}
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		paths[name] = p
	}
	return paths
}

// runEval runs worker search-eval with args, returning the exit code,
// stdout and stderr.
func runEval(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"search-eval"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// TestSearchEvalGoldNames: gold tools named with their server or as the
// model sees them are scored as the tool they name (they were misses,
// recall 0, with a warning that they were in no catalog), and a set none
// of whose gold tools is in the catalogs is refused instead of scoring 0.
func TestSearchEvalGoldNames(t *testing.T) {
	t.Parallel()
	p := evalFiles(t, map[string]string{
		"gh.json":    `{"server":"github","tools":[{"name":"create_issue","description":"Create an issue in a repository."},{"name":"search","description":"Search code."}]}`,
		"wiki.json":  `{"server":"wiki","tools":[{"name":"search","description":"Search the wiki pages."},{"name":"get page","description":"Read a wiki page."}]}`,
		"other.json": `{"server":"other","tools":[{"name":"ping","description":"Ping a host."}]}`,
	})
	for _, tt := range []struct {
		name, gold string
		code       int
		recall     float64 // recall@10
		stderr     string
	}{
		{"slash", `"github/create_issue"`, 0, 1, `"github/create_issue" as github/create_issue`},
		{"qualified, unique", `"github__create_issue"`, 0, 1, `"github__create_issue" as github/create_issue`},
		{"dot", `"wiki.search"`, 0, 1, `"wiki.search" as wiki/search`},
		{"qualified by the registry", `"wiki__search"`, 0, 1, ""},
		{"sanitized", `"get_page"`, 0, 1, ""},
		{"sanitized, with its server", `"wiki/get_page"`, 0, 1, `"wiki/get_page" as wiki/get page`},
		{"one in no catalog", `"github/create_issue","jira/create_issue"`, 0, 0.5, "1 gold tools are in no catalog given: jira/create_issue"},
		{"none in any catalog", `"jira/create_issue"`, 1, 0, "none of the 1 gold tools of "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := evalFiles(t, map[string]string{"q.jsonl": `{"query":"create an issue in a repository, search the wiki pages, read a wiki page","gold_tools":[` + tt.gold + `]}` + "\n"})["q.jsonl"]
			code, out, errs := runEval(t, "--json", q, p["gh.json"], p["wiki.json"], p["other.json"])
			if code != tt.code || !strings.Contains(errs, tt.stderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d, stderr with %q", code, errs, tt.code, tt.stderr)
			}
			if code != 0 {
				if out != "" {
					t.Errorf("stdout %q with an error", out)
				}
				return
			}
			var m map[string]float64
			if err := json.Unmarshal([]byte(out), &m); err != nil || m["recall@10"] != tt.recall {
				t.Errorf("recall@10 %v, want %v: %s (%v)", m["recall@10"], tt.recall, out, err)
			}
		})
	}
}

// TestSearchEvalUsage: a command line search-eval cannot run exits 2 with
// one line saying why (it exited 1, as a file that failed to load does);
// a directory or a pattern that matched nothing is named as such.
func TestSearchEvalUsage(t *testing.T) {
	t.Parallel()
	p := evalFiles(t, map[string]string{
		"q.jsonl":  `{"query":"read a file","gold_tools":["read_file"]}` + "\n",
		"c.json":   `{"server":"fs","tools":[{"name":"read_file","description":"Read a file."}]}`,
		"bad.json": `{"server":"fs"}`,
	})
	dir := filepath.Dir(p["c.json"])
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown flag", []string{"--nope", p["q.jsonl"], p["c.json"]}, 2, "flag provided but not defined: -nope"},
		{"k 0", []string{"--k", "0", p["q.jsonl"], p["c.json"]}, 2, `--k "0": want positive integers`},
		{"k empty", []string{"--k", "", p["q.jsonl"], p["c.json"]}, 2, `--k "": want positive integers`},
		{"no catalog", []string{p["q.jsonl"]}, 2, "name a queries file and at least one catalog file"},
		{"half", []string{"--half", "x", p["q.jsonl"], p["c.json"]}, 2, `--half "x": want choose or report`},
		{"weight without a model", []string{"--embed-weight", "2", p["q.jsonl"], p["c.json"]}, 2, "which is not given"},
		{"weight out of range", []string{"--embed-model", "m", "--embed-weight", "0", p["q.jsonl"], p["c.json"]}, 2, "--embed-weight"},
		{"a directory", []string{p["q.jsonl"], dir}, 2, dir + " is a directory: name its files (" + filepath.Join(dir, "*.json") + ")"},
		{"no such file", []string{p["q.jsonl"], filepath.Join(dir, "nope.json")}, 2, "nope.json: no such file\n"},
		{"a pattern", []string{p["q.jsonl"], filepath.Join(dir, "*.catalog")}, 2, "*.catalog: no such file (a pattern that matched nothing?)"},
		{"queries a directory", []string{dir, p["c.json"]}, 2, " is a directory"},
		{"a catalog with no tools array", []string{p["q.jsonl"], p["bad.json"]}, 1, `no "tools" array`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errs := runEval(t, tt.args...)
			if code != tt.code || out != "" || !strings.Contains(errs, tt.want) || strings.Count(errs, "\n") != 1 {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and one line with %q", code, out, errs, tt.code, tt.want)
			}
		})
	}
}

// TestUnnamedServers: catalog files without a "server" are named by their
// file, and files that share a file name by their directories (or paths).
func TestUnnamedServers(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name        string
		paths, want []string
	}{
		{"distinct", []string{"a/gh.json", "", "b/slack.json"}, []string{"gh", "", "slack"}},
		{"one file name", []string{"s/gh/tools.json", "s/slack/tools.json", "x.json"}, []string{"gh", "slack", "x"}},
		{"one directory name", []string{"a/s/tools.json", "b/s/tools.json"}, []string{"a/s/tools", "b/s/tools"}},
		{"a named file is not renamed", []string{"gh/tools.json", ""}, []string{"tools", ""}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := unnamedServers(tt.paths); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestSearchEvalCatalogFiles: two different servers' files of one name
// without a "server" (gh/tools.json, slack/tools.json) were one server
// "tools", the second's "search" dropped as captured twice, and a gold
// tool of slack found as gh's; one file given twice is read once.
func TestSearchEvalCatalogFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(rel, text string) string {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gh := write("gh/tools.json", `{"tools":[{"name":"search","description":"Search code in repositories."},{"name":"create_issue","description":"Create an issue."}]}`)
	slack := write("slack/tools.json", `[{"name":"search","description":"Search messages in channels."},{"name":"post_message","description":"Post a message."}]`)
	slack2 := write("slack.json", `[{"name":"search","description":"Search messages in channels."},{"name":"post_message","description":"Post a message."}]`)
	q := write("q.jsonl", `{"query":"search code in repositories","gold":[{"tool":"search","servers":["slack"]}]}`+"\n")
	for _, tt := range []struct {
		name   string
		files  []string
		out    string // in stdout
		recall float64
		stderr string
	}{
		{"one file name", []string{gh, slack}, "4 tools in 2 catalog files", 1, `named by their directories: ` + gh + ` as "gh", ` + slack + ` as "slack"`},
		{"a file twice", []string{slack2, slack2, dir + "/./slack.json"}, "2 tools in 1 catalog files", 1, dir + "/./slack.json is " + slack2 + " given again; read once"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errs := runEval(t, append([]string{"--k", "10", q}, tt.files...)...)
			if code != 0 || !strings.Contains(out, tt.out) || !strings.Contains(out, fmt.Sprintf("recall@10  %.3f", tt.recall)) || !strings.Contains(errs, tt.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
			}
		})
	}
}

// TestSearchEvalNotes: items without gold tools are named on stderr (the
// "items" figure silently counted only the others), and --misses with no
// miss says so instead of "0 gold tools not in the first 10:".
func TestSearchEvalNotes(t *testing.T) {
	t.Parallel()
	p := evalFiles(t, map[string]string{
		"c.json": `{"server":"fs","tools":[{"name":"read_file","description":"Read a file."}]}`,
		"q.jsonl": `{"id":"a","query":"read a file","gold_tools":["read_file"]}` + "\n" +
			`{"id":"b","query":"read a file","gold_tool":["read_file"]}` + "\n" + `{"query":"x"}` + "\n",
	})
	for _, tt := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"no gold", []string{"--json"}, "search-eval: note: 2 of 3 items have no gold tools and are not scored: b, item 3\n"},
		{"no miss", []string{"--json", "--misses"}, "search-eval: every gold tool is in the first 10\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, out, errs := runEval(t, append(tt.args, p["q.jsonl"], p["c.json"])...)
			if code != 0 || !strings.Contains(errs, tt.stderr) || !strings.Contains(out, `"items":1,`) {
				t.Errorf("exit %d, stdout %q, stderr %q; want stderr with %q", code, out, errs, tt.stderr)
			}
		})
	}
}
