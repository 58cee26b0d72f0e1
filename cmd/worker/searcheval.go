package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jetagent/jetagent/internal/toolcache"
)

// searchEval scores the loop's tool search on a retrieval set:
// worker search-eval [--json] [--k 1,5,10] QUERIES.jsonl CATALOG.json...
// Each catalog file is one server (or several, with a tool_server array),
// named as the pool names them; each line's query is one search with the
// whole request, by the same index and ranking search_tools uses.
func searchEval(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("search-eval", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print one JSON object")
	kList := fs.String("k", "1,5,10", "cut-offs, comma-separated")
	// Flags may come before or after the files.
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			return fmt.Errorf("search-eval: %w (usage: worker search-eval [--json] [--k 1,5,10] QUERIES.jsonl CATALOG.json...)", err)
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	var ks []int
	for _, f := range strings.Split(*kList, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 {
			return fmt.Errorf("search-eval: --k %q: want positive integers, comma-separated", *kList)
		}
		ks = append(ks, k)
	}
	if len(files) < 2 {
		return errors.New("search-eval: name a queries file and at least one catalog file")
	}
	items, err := toolcache.LoadEvalItems(files[0])
	if err != nil {
		return err
	}
	var lists [][]toolcache.Tool
	for _, path := range files[1:] {
		_, tools, err := toolcache.LoadCatalog(path)
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		for i := range tools {
			if tools[i].Server == "" {
				tools[i].Server = name
			}
		}
		lists = append(lists, tools)
	}
	reg := toolcache.NewRegistry(lists...)
	start := time.Now()
	reg.Index() // built once, as the pool builds it per catalog version
	build := time.Since(start)
	res := toolcache.Evaluate(toolcache.EvalSearch(reg), items, ks)
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
		fmt.Fprintf(&b, `,"p50_us":%s,"p99_us":%s}`, num(us(res.P50)), num(us(res.P99)))
		if !json.Valid([]byte(b.String())) {
			return fmt.Errorf("search-eval: internal error: invalid JSON %s", b.String())
		}
		_, err := fmt.Fprintln(stdout, b.String())
		return err
	}
	fmt.Fprintf(stdout, "%d items with gold tools, %d tools in %d catalog files (index built in %s)\n",
		res.Items, reg.Count(), len(files)-1, build.Round(time.Microsecond))
	for i, k := range res.Ks {
		fmt.Fprintf(stdout, "recall@%-3d %.3f   hit@%-3d %.3f\n", k, res.Recall[i], k, res.Hit[i])
	}
	_, err = fmt.Fprintf(stdout, "latency per search: p50 %.0f µs, p99 %.0f µs\n", us(res.P50), us(res.P99))
	return err
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
