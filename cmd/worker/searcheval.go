package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// searchEval scores the loop's tool search on a retrieval set:
// worker search-eval [--json] [--k 1,5,10] [--half choose|report] [--embed-model M [--embed-weight W]] QUERIES.jsonl CATALOG.json...
// Each catalog file is one server (or several, with a tool_server array),
// named as the pool names them; each line's query is one search with the
// whole request, by the same index and ranking search_tools uses. --half
// keeps one fixed half of the set (toolcache.EvalHalf): the one the
// ranking was chosen on, or the one kept for reporting. --embed-model
// measures the hybrid ranking (BM25F fused with the similarity of
// embeddings from M at OPENAI_BASE_URL's /embeddings, key OPENAI_API_KEY):
// tool vectors are computed first, each query embedded once.
func searchEval(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("search-eval", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print one JSON object")
	kList := fs.String("k", "1,5,10", "cut-offs, comma-separated")
	half := fs.String("half", "", "choose or report: only that fixed half of the set")
	misses := fs.Bool("misses", false, "also list on stderr each gold tool not in the first (largest) k, with its rank")
	embedModel := fs.String("embed-model", "", "embedding model for the hybrid ranking (empty: BM25F only)")
	embedWeight := fs.Float64("embed-weight", toolcache.DefaultVectorWeight, "with --embed-model: the vector ranking's weight in the fusion, BM25F's being 1 (JETAGENT_EMBEDDING_WEIGHT)")
	// Flags may come before or after the files.
	var files []string
	for {
		if err := parseFlags(fs, args, "worker search-eval [--json] [--k 1,5,10] [--half choose|report] [--misses] [--embed-model M [--embed-weight W]] QUERIES.jsonl CATALOG.json...",
			"Recall@k and hit@k of search_tools' ranking (the loop's own index and code) on a retrieval set.\n"+
				"QUERIES.jsonl: one {\"query\", \"gold_tools\": [...]} a line, or a JSON array of them (optional\n"+
				"\"gold\": [{\"tool\", \"servers\"}], \"acceptable_alternatives\"); a tool may be named \"server/tool\".\n"+
				"Each query is one search with the whole request.\n"+
				"CATALOG.json: a tools/list result, each file one server ({\"server\", \"tools\": [...]}, an\n"+
				"aggregated file with \"tool_server\", a bare array or a JSON-RPC response).", stdout); err != nil {
			return err // errHelped, or a usageError
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	weighted := false
	fs.Visit(func(f *flag.Flag) { weighted = weighted || f.Name == "embed-weight" })
	if weighted && *embedModel == "" {
		return usageError{errors.New("search-eval: --embed-weight weighs the vectors of --embed-model, which is not given")}
	}
	ks, err := parseKs(*kList)
	if err != nil {
		return usageError{err}
	}
	if len(files) < 2 {
		return usageError{errors.New("search-eval: name a queries file and at least one catalog file")}
	}
	for _, f := range files {
		if err := evalFileArg(f); err != nil {
			return usageError{err}
		}
	}
	items, err := toolcache.LoadEvalItems(files[0])
	if err != nil {
		// Files in the wrong order ("search-eval CATALOG QUERIES") said only
		// "catalog.json line 1: unexpected end of JSON input".
		return fmt.Errorf("search-eval: queries file (the first file: one {\"query\", \"gold_tools\"} a line): %w", err)
	}
	if *half != "" {
		want := map[string]int{"choose": 0, "report": 1}
		h, ok := want[strings.ToLower(*half)] // in any case, as the worker's settings
		if !ok {
			return usageError{fmt.Errorf("search-eval: --half %q: want choose or report", *half)}
		}
		items = slices.DeleteFunc(items, func(it toolcache.EvalItem) bool { return toolcache.EvalHalf(it) != h })
	}
	// Nothing to measure is an error, not a row of zeros: a script reading
	// {"items":0,"recall@10":0} took an empty or mistyped file (or a half
	// with no items) for a ranking that finds nothing.
	if !slices.ContainsFunc(items, func(it toolcache.EvalItem) bool { return len(it.Gold) > 0 }) {
		where := files[0]
		if *half != "" {
			where += " (--half " + *half + ")"
		}
		return fmt.Errorf("search-eval: %s: no item with gold tools (%d items read): nothing to measure", where, len(items))
	}
	var nogold []string
	for n, it := range items {
		if len(it.Gold) == 0 {
			nogold = append(nogold, cmp.Or(it.ID, fmt.Sprintf("item %d", n+1)))
		}
	}
	if len(nogold) > 0 {
		// "items" counts the others: said, so that a gold field misspelt
		// in some items does not pass for a smaller set.
		fmt.Fprintf(stderr, "search-eval: note: %d of %d items have no gold tools and are not scored: %s\n", len(nogold), len(items), firstOf(nogold, 10))
	}
	type catFile struct {
		path  string
		tools []toolcache.Tool
	}
	var cats []catFile
	var seen []os.FileInfo
	for _, path := range files[1:] {
		// One file named twice (a pattern and its file, or a file given
		// again) is read once.
		if fi, err := os.Stat(path); err == nil {
			if i := slices.IndexFunc(seen, func(o os.FileInfo) bool { return os.SameFile(o, fi) }); i >= 0 {
				fmt.Fprintf(stderr, "search-eval: note: %s is %s given again; read once\n", path, cats[i].path)
				continue
			}
			seen = append(seen, fi)
		}
		_, tools, skipped, err := toolcache.LoadCatalogAsServed(path)
		if err != nil {
			return err
		}
		noteSkipped(stderr, "search-eval", path, skipped)
		cats = append(cats, catFile{path, tools})
	}
	// A file without a "server" is the server named by the file. Two
	// files of one name (servers/github/tools.json and
	// servers/slack/tools.json) were one server "tools" before, the
	// second's tools of a name the first has dropped as captured twice:
	// such files are named by their directories instead.
	paths := make([]string, len(cats))
	for i, c := range cats {
		if slices.ContainsFunc(c.tools, func(t toolcache.Tool) bool { return t.Server == "" }) {
			paths[i] = c.path
		}
	}
	names := unnamedServers(paths)
	var renamed []string
	for i, c := range cats {
		if paths[i] != "" && names[i] != strings.TrimSuffix(filepath.Base(c.path), filepath.Ext(c.path)) {
			renamed = append(renamed, fmt.Sprintf("%s as %q", c.path, names[i]))
		}
	}
	if len(renamed) > 0 {
		fmt.Fprintf(stderr, "search-eval: note: files without a \"server\" that share a file name are named by their directories: %s\n", strings.Join(renamed, ", "))
	}
	var lists [][]toolcache.Tool
	// A server name is one server, as in the worker's MCP servers file: a
	// tool that an earlier catalog file gives the same server already (two
	// captures of one server) is left out, or the index would hold it
	// twice under one model-facing name.
	have := map[[2]string]bool{}
	for ci, c := range cats {
		tools := c.tools
		for i := range tools {
			if tools[i].Server == "" {
				tools[i].Server = names[ci]
			}
		}
		dup := map[string]int{}
		tools = slices.DeleteFunc(tools, func(t toolcache.Tool) bool {
			if have[[2]string{t.Server, t.Name}] {
				dup[t.Server]++
				return true
			}
			return false
		})
		for _, t := range tools {
			have[[2]string{t.Server, t.Name}] = true
		}
		for _, srv := range slices.Sorted(maps.Keys(dup)) {
			fmt.Fprintf(stderr, "search-eval: note: %d tools of server %q in %s are in an earlier catalog already; indexed once\n", dup[srv], srv, c.path)
		}
		lists = append(lists, tools)
	}
	reg := toolcache.NewRegistry(lists...)
	if reg.Count() == 0 {
		return fmt.Errorf("search-eval: the catalog files hold no tools (%s): nothing to search", strings.Join(files[1:], ", "))
	}
	items, read := toolcache.ResolveEvalTools(items, reg.List())
	if len(read) > 0 {
		// A set naming tools with their server ("github/create_issue") or
		// as the model sees them scored each such tool a miss before.
		fmt.Fprintf(stderr, "search-eval: note: %d tool names of the set read with their server or as the model sees them: %s\n",
			len(read), firstOf(read, 10))
	}
	missing, distinct := toolcache.MissingGold(items, reg.List())
	if len(missing) == distinct {
		// Every item would score 0: the catalogs of another set, not a
		// ranking that finds nothing.
		return fmt.Errorf("search-eval: none of the %d gold tools of %s is in the catalogs given (%s): nothing could be found; gold tools: %s",
			distinct, files[0], strings.Join(files[1:], ", "), firstOf(missing, 10))
	}
	if len(missing) > 0 {
		// Still scored (as misses), but said: a catalog left out or a
		// misspelt name would otherwise pass for a poor ranking.
		fmt.Fprintf(stderr, "search-eval: warning: %d gold tools are in no catalog given: %s\n", len(missing), firstOf(missing, 10))
	}
	if missing, _ := toolcache.MissingAlternatives(items, reg.List()); len(missing) > 0 {
		fmt.Fprintf(stderr, "search-eval: warning: %d acceptable alternatives are in no catalog given: %s\n", len(missing), firstOf(missing, 10))
	}
	start := time.Now()
	ix := reg.Index() // built once, as the pool builds it per catalog version
	search := toolcache.EvalSearch(reg)
	runs, fallbacks := 3, 0
	if *embedModel != "" {
		if err := toolcache.CheckVectorWeight(*embedWeight); err != nil {
			return usageError{fmt.Errorf("search-eval: --embed-weight: %w", err)}
		}
		base := os.Getenv("OPENAI_BASE_URL")
		if base == "" {
			base = defaultBaseURL
		}
		emb, err := llm.NewEmbedder(llm.Config{BaseURL: base, APIKey: os.Getenv("OPENAI_API_KEY")}, *embedModel)
		if err != nil {
			return fmt.Errorf("search-eval: %w", err)
		}
		sem, err := toolcache.EmbedIndex(context.Background(), ix, emb, &toolcache.MemoryVectorStore{})
		if err != nil {
			return fmt.Errorf("search-eval: %w", err)
		}
		if sem, err = sem.WithVectorWeight(*embedWeight); err != nil {
			return fmt.Errorf("search-eval: --embed-weight: %w", err)
		}
		search, runs = toolcache.EvalSemanticSearch(context.Background(), sem, &fallbacks), 1
	}
	build := time.Since(start)
	res := toolcache.EvaluateRuns(search, items, ks, runs)
	if *misses && len(res.Ks) > 0 {
		writeMisses(stderr, toolcache.EvalMisses(search, items, res.Ks[len(res.Ks)-1]), res.Ks[len(res.Ks)-1])
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	if *asJSON {
		var b strings.Builder
		fmt.Fprintf(&b, `{"items":%d`, res.Items)
		for i, k := range res.Ks {
			fmt.Fprintf(&b, `,"recall@%d":%s`, k, num(res.Recall[i]))
		}
		for i, k := range res.Ks {
			fmt.Fprintf(&b, `,"hit@%d":%s`, k, num(res.Hit[i]))
		}
		fmt.Fprintf(&b, `,"p50_us":%s,"p99_us":%s`, num(us(res.P50)), num(us(res.P99)))
		if *embedModel != "" {
			fmt.Fprintf(&b, `,"semantic_fallbacks":%d`, fallbacks)
		}
		b.WriteString("}")
		if !json.Valid([]byte(b.String())) {
			return fmt.Errorf("search-eval: internal error: invalid JSON %s", b.String())
		}
		_, err := fmt.Fprintln(stdout, b.String())
		return err
	}
	fmt.Fprintf(stdout, "%d items with gold tools, %d tools in %d catalog files (index built in %s)\n",
		res.Items, reg.Count(), len(cats), build.Round(time.Microsecond))
	for i, k := range res.Ks {
		fmt.Fprintf(stdout, "recall@%-3d %.3f   hit@%-3d %.3f\n", k, res.Recall[i], k, res.Hit[i])
	}
	if *embedModel != "" {
		fmt.Fprintf(stdout, "hybrid with %s: %d searches fell back to BM25F\n", *embedModel, fallbacks)
	}
	_, err = fmt.Fprintf(stdout, "latency per search: p50 %.0f µs, p99 %.0f µs\n", us(res.P50), us(res.P99))
	return err
}

// unnamedServers names the servers of catalog files without a "server"
// (paths, "" for a file that has one): by the file's name, or when
// several different files share that name, by their directory's, or by
// their path when those are shared too.
func unnamedServers(paths []string) []string {
	levels := []func(string) string{
		func(p string) string { return strings.TrimSuffix(filepath.Base(p), filepath.Ext(p)) },
		func(p string) string { return filepath.Base(filepath.Dir(p)) },
		func(p string) string { p = filepath.Clean(p); return strings.TrimSuffix(p, filepath.Ext(p)) },
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		if p != "" {
			names[i] = levels[0](p)
		}
	}
	for _, name := range levels[1:] {
		count := map[string]int{}
		for i, p := range paths {
			if p != "" {
				count[names[i]]++
			}
		}
		next, clash := slices.Clone(names), false
		for i, p := range paths {
			if p != "" && count[names[i]] > 1 {
				next[i], clash = name(p), true
			}
		}
		if !clash {
			break
		}
		names = next
	}
	return names
}

// usageError is a command line a subcommand cannot run: run exits 2 for
// it, as for an unknown command, and 1 for what the files hold. Every
// error exited 1: a script could not tell a mistyped flag or file name
// from a set that failed to load.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// evalFileArg refuses a file argument that is no file: a directory (the
// catalogs' directory instead of its files) or a name that does not exist
// (a shell pattern that matched nothing is passed on as written).
func evalFileArg(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil && strings.ContainsAny(path, "*?["):
		return fmt.Errorf("search-eval: %s: no such file (a pattern that matched nothing?)", path)
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("search-eval: %s: no such file", path)
	case err != nil:
		return fmt.Errorf("search-eval: %w", err)
	case fi.IsDir():
		return fmt.Errorf("search-eval: %s is a directory: name its files (%s)", path, filepath.Join(path, "*.json"))
	}
	return nil
}

// writeMisses lists the gold tools not in the first k, one a line, under
// the item's request (cut to one line of at most 100 characters).
func writeMisses(w io.Writer, misses []toolcache.EvalMiss, k int) {
	if len(misses) == 0 {
		fmt.Fprintf(w, "search-eval: every gold tool is in the first %d\n", k)
		return
	}
	fmt.Fprintf(w, "search-eval: %d gold tools not in the first %d:\n", len(misses), k)
	last := ""
	for _, m := range misses {
		if m.Item != last {
			last = m.Item
			q := strings.Join(strings.Fields(m.Query), " ")
			if r := []rune(q); len(r) > 100 {
				q = string(r[:99]) + "…"
			}
			fmt.Fprintf(w, "  %s: %s\n", m.Item, q)
		}
		name := m.Tool.Tool
		if len(m.Tool.Servers) > 0 {
			name = strings.Join(m.Tool.Servers, "|") + "/" + name
		}
		rank := fmt.Sprintf("rank %d", m.Rank)
		if m.Rank == 0 {
			rank = fmt.Sprintf("not in the first %d", toolcache.MissDepth)
		}
		fmt.Fprintf(w, "    %s: %s\n", name, rank)
	}
}

// noteSkipped says on stderr which definitions of a catalog file were left
// out, as the pool leaves them out of a server's tools/list (the first
// three, and how many more).
func noteSkipped(stderr io.Writer, cmd, path string, skipped []error) {
	if len(skipped) == 0 {
		return
	}
	shown := make([]string, 0, 3)
	for _, err := range skipped[:min(len(skipped), 3)] {
		shown = append(shown, err.Error())
	}
	more := ""
	if len(skipped) > len(shown) {
		more = fmt.Sprintf("; and %d more", len(skipped)-len(shown))
	}
	fmt.Fprintf(stderr, "%s: note: %d tool definitions in %s left out, as the worker would: %s%s\n",
		cmd, len(skipped), path, strings.Join(shown, "; "), more)
}

// parseKs reads --k: positive integers, comma-separated, returned sorted
// and each once ("1,1" printed "recall@1" twice, a JSON object with a
// duplicate key).
func parseKs(list string) ([]int, error) {
	var ks []int
	for _, f := range strings.Split(list, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 {
			return nil, fmt.Errorf("search-eval: --k %q: want positive integers, comma-separated", list)
		}
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return slices.Compact(ks), nil
}

// firstOf is the first n of names, comma-separated, and how many more.
func firstOf(names []string, n int) string {
	s := strings.Join(names[:min(len(names), n)], ", ")
	if len(names) > n {
		s += fmt.Sprintf(" and %d more", len(names)-n)
	}
	return s
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
