package toolcache

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"slices"
	"sort"
	"strings"
	"time"
)

// EvalItem is one line of a retrieval set (the format of
// ../shared/retrieval/livemcpbench-dev.jsonl): a request and the tools that
// solve it, by their servers' own names.
type EvalItem struct {
	ID    string `json:"id"`
	Query string `json:"query"`
	// Gold are the tools that solve the request, each optionally with the
	// servers that offer a tool of that name (any of them counts).
	Gold []EvalTool
	// Alternatives are other tools that would also do (hit@k only).
	Alternatives []EvalTool
}

// EvalTool names a tool by its server's own name, optionally restricted to
// some servers.
type EvalTool struct {
	Tool    string   `json:"tool"`
	Servers []string `json:"servers,omitempty"`
}

func (g EvalTool) matches(t Tool) bool {
	return (t.Original == g.Tool || t.Name == g.Tool) && (len(g.Servers) == 0 || slices.Contains(g.Servers, t.Server))
}

// MissingGold lists the gold tools of items that no tool of tools
// matches ("server/tool", or "tool" when any server would do), each once:
// a catalog left out or a misspelt name makes recall look worse than it
// is. distinct is how many distinct gold tools the items name.
func MissingGold(items []EvalItem, tools []Tool) (missing []string, distinct int) {
	return missingTools(items, tools, func(it EvalItem) []EvalTool { return it.Gold })
}

// MissingAlternatives is MissingGold for the acceptable alternatives.
func MissingAlternatives(items []EvalItem, tools []Tool) (missing []string, distinct int) {
	return missingTools(items, tools, func(it EvalItem) []EvalTool { return it.Alternatives })
}

func missingTools(items []EvalItem, tools []Tool, of func(EvalItem) []EvalTool) (out []string, distinct int) {
	seen := map[string]bool{}
	for _, it := range items {
		for _, g := range of(it) {
			key := g.String()
			if seen[key] {
				continue
			}
			seen[key] = true
			if !slices.ContainsFunc(tools, g.matches) {
				out = append(out, key)
			}
		}
	}
	return out, len(seen)
}

// String is "tool", or "server/tool" ("s1|s2/tool") when restricted to
// some servers.
func (g EvalTool) String() string {
	if len(g.Servers) == 0 {
		return g.Tool
	}
	return strings.Join(g.Servers, "|") + "/" + g.Tool
}

// evalPrefixSeps are the separators a set may write between a server and
// its tool: "server/tool", "server__tool" (the model-facing name of a tool
// two servers offer), "server.tool", "server:tool".
var evalPrefixSeps = []string{"/", qualifySep, ".", ":"}

// ResolveEvalTools reads each gold tool and alternative of items that no
// tool of tools matches by its own name as a set may also write it: with
// its server in front (evalPrefixSeps; the server as its catalog names it
// or as the model sees it), or by the name the model sees (the loop
// sanitizes names and qualifies one that two servers offer: a gold
// "get_weather" is the server's "get weather", also when the model sees
// "alpha__get_weather"). Without this such a name matched nothing and
// counted as a miss in every item. A name that reads as tools of several
// names is left as it is. It returns the items (changed ones copied) and
// one note per name read so, in the order met.
func ResolveEvalTools(items []EvalItem, tools []Tool) ([]EvalItem, []string) {
	type result struct {
		t  EvalTool
		ok bool
	}
	cache := map[string]result{}
	var notes []string
	resolve := func(g EvalTool) EvalTool {
		if slices.ContainsFunc(tools, g.matches) {
			return g
		}
		key := g.String()
		if r, ok := cache[key]; ok {
			if r.ok {
				return r.t
			}
			return g
		}
		var found EvalTool
		ok := true
		for _, t := range tools {
			if len(g.Servers) > 0 && !slices.Contains(g.Servers, t.Server) {
				continue
			}
			if !evalNameOf(g.Tool, t) {
				continue
			}
			switch {
			case found.Tool == "":
				found = EvalTool{Tool: t.Original, Servers: []string{t.Server}}
			case found.Tool != t.Original:
				ok = false
			case !slices.Contains(found.Servers, t.Server):
				found.Servers = append(found.Servers, t.Server)
			}
		}
		ok = ok && found.Tool != ""
		if ok {
			slices.Sort(found.Servers)
			if len(g.Servers) == 0 && sanitizeName(found.Tool) == g.Tool {
				// A model-facing name without a server: any server's
				// tool of that name, as the set wrote it.
				found.Servers = nil
			}
			notes = append(notes, fmt.Sprintf("%q as %s", g.Tool, found))
		}
		cache[key] = result{found, ok}
		if ok {
			return found
		}
		return g
	}
	out, copied := items, false
	for i, it := range items {
		gold, alts := resolveAll(it.Gold, resolve), resolveAll(it.Alternatives, resolve)
		if gold == nil && alts == nil {
			continue
		}
		if !copied {
			out, copied = slices.Clone(items), true
		}
		if gold != nil {
			out[i].Gold = gold
		}
		if alts != nil {
			out[i].Alternatives = alts
		}
	}
	return out, notes
}

// resolveAll is ts through resolve, or nil when nothing changed.
func resolveAll(ts []EvalTool, resolve func(EvalTool) EvalTool) []EvalTool {
	var out []EvalTool
	for i, g := range ts {
		r := resolve(g)
		if out == nil && (r.Tool != g.Tool || !slices.Equal(r.Servers, g.Servers)) {
			out = slices.Clone(ts)
		}
		if out != nil {
			out[i] = r
		}
	}
	return out
}

// evalNameOf reports whether name names t in another form than its own
// name: its model-facing base name, or either with its server in front.
func evalNameOf(name string, t Tool) bool {
	tool := []string{t.Original, sanitizeName(t.Original), t.Name}
	if name == tool[1] {
		return true
	}
	for _, srv := range []string{t.Server, sanitizeName(t.Server)} {
		for _, sep := range evalPrefixSeps {
			rest, ok := strings.CutPrefix(name, srv+sep)
			if ok && srv != "" && slices.Contains(tool, rest) {
				return true
			}
		}
	}
	return false
}

// ParseEvalItem reads one line: "query", "gold_tools" (names), optional
// "gold" ([{tool, servers}], which says where each gold tool lives) and
// optional "acceptable_alternatives" (names, {tool, servers} objects, or
// lists of either).
func ParseEvalItem(line []byte) (EvalItem, error) {
	var raw struct {
		ID        string            `json:"id"`
		Query     string            `json:"query"`
		GoldTools []string          `json:"gold_tools"`
		Gold      []EvalTool        `json:"gold"`
		Alts      []json.RawMessage `json:"acceptable_alternatives"`
	}
	if err := json.Unmarshal(line, &raw); err != nil {
		return EvalItem{}, err
	}
	if strings.TrimSpace(raw.Query) == "" {
		// Scored, it would pass for a ranking that found nothing.
		return EvalItem{}, errors.New(`no "query" (or only white space)`)
	}
	it := EvalItem{ID: raw.ID, Query: raw.Query}
	seen := map[string]bool{}
	for _, g := range raw.Gold {
		if g.Tool != "" && !seen[g.Tool] {
			seen[g.Tool] = true
			it.Gold = append(it.Gold, g)
		}
	}
	for _, name := range raw.GoldTools {
		if name != "" && !seen[name] {
			seen[name] = true
			it.Gold = append(it.Gold, EvalTool{Tool: name})
		}
	}
	var alt func(json.RawMessage)
	alt = func(m json.RawMessage) {
		m = bytes.TrimSpace(m)
		var s string
		var t EvalTool
		var list []json.RawMessage
		switch {
		case json.Unmarshal(m, &s) == nil && s != "":
			it.Alternatives = append(it.Alternatives, EvalTool{Tool: s})
		case len(m) > 0 && m[0] == '[' && json.Unmarshal(m, &list) == nil:
			for _, e := range list {
				alt(e)
			}
		case len(m) > 0 && m[0] == '{' && json.Unmarshal(m, &t) == nil && t.Tool != "":
			it.Alternatives = append(it.Alternatives, t)
		case len(m) > 0 && m[0] == '{':
			// {"name": ...} or {"tools": [...]}
			var o struct {
				Name    string            `json:"name"`
				Servers []string          `json:"servers"`
				Tools   []json.RawMessage `json:"tools"`
			}
			if json.Unmarshal(m, &o) == nil {
				if o.Name != "" {
					it.Alternatives = append(it.Alternatives, EvalTool{Tool: o.Name, Servers: o.Servers})
				}
				for _, e := range o.Tools {
					alt(e)
				}
			}
		}
	}
	for _, a := range raw.Alts {
		alt(a)
	}
	return it, nil
}

// LoadEvalItems reads a JSON-lines retrieval set.
func LoadEvalItems(path string) ([]EvalItem, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("toolcache: read queries: %w", err)
	}
	defer f.Close()
	var items []EvalItem
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if n == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf")) // a byte order mark, as some editors write
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		it, err := ParseEvalItem(line)
		if err != nil {
			return nil, fmt.Errorf("toolcache: %s line %d: %w", path, n, err)
		}
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("toolcache: read queries: %w", err)
	}
	return items, nil
}

// EvalMiss is a gold tool of an item that a search did not rank in the
// first k.
type EvalMiss struct {
	Item  string // the item's id ("line N" when it has none)
	Query string
	Tool  EvalTool
	// Rank is the tool's 1-based place in the first MissDepth results, 0
	// when it is not among them.
	Rank int
}

// MissDepth is how deep EvalMisses looks for a missed tool's rank.
const MissDepth = 100

// EvalMisses lists, item by item, the gold tools that search does not put
// in the first k: where a deployment's ranking fails, to read before
// changing it.
func EvalMisses(search func(query string, limit int) []Tool, items []EvalItem, k int) []EvalMiss {
	var out []EvalMiss
	for n, it := range items {
		if len(it.Gold) == 0 {
			continue
		}
		got := search(it.Query, max(k, MissDepth))
		id := it.ID
		if id == "" {
			id = fmt.Sprintf("item %d", n+1)
		}
		for _, g := range it.Gold {
			rank := slices.IndexFunc(got, g.matches) + 1
			if rank == 0 || rank > k {
				out = append(out, EvalMiss{Item: id, Query: it.Query, Tool: g, Rank: rank})
			}
		}
	}
	return out
}

// EvalResult is recall@k and hit@k per k, and search latency.
type EvalResult struct {
	Items  int // items with gold tools (the averages' denominator)
	Ks     []int
	Recall []float64 // share of an item's gold tools in the first k
	Hit    []float64 // any gold tool or alternative in the first k
	P50    time.Duration
	P99    time.Duration
}

// timingRuns is how many times Evaluate times each search: its latency is
// the median, so that a busy machine's scheduling shows less in the
// percentiles than the search's own cost.
const timingRuns = 3

// Evaluate runs each item's query as one search for the largest k and
// scores the ranking at each k. Latency is per search, after one untimed
// warm-up search (the index's first search sets up what later ones
// reuse), the median of timingRuns runs of each query.
func Evaluate(search func(query string, limit int) []Tool, items []EvalItem, ks []int) EvalResult {
	return EvaluateRuns(search, items, ks, timingRuns)
}

// EvaluateRuns is Evaluate with each query timed runs times (a search
// that costs a remote request, e.g. one embedding the query, is better
// run once).
func EvaluateRuns(search func(query string, limit int) []Tool, items []EvalItem, ks []int, runs int) EvalResult {
	runs = max(runs, 1)
	ks = slices.Clone(ks)
	sort.Ints(ks)
	res := EvalResult{Ks: ks, Recall: make([]float64, len(ks)), Hit: make([]float64, len(ks))}
	if len(ks) == 0 {
		return res
	}
	if len(items) > 0 {
		search(items[0].Query, ks[len(ks)-1])
	}
	var lat []time.Duration
	for _, it := range items {
		if len(it.Gold) == 0 {
			continue
		}
		res.Items++
		var hits []Tool
		times := make([]time.Duration, runs)
		for r := range times {
			start := time.Now()
			hits = search(it.Query, ks[len(ks)-1])
			times[r] = time.Since(start)
		}
		slices.Sort(times)
		lat = append(lat, times[runs/2])
		for ki, k := range ks {
			top := hits[:min(k, len(hits))]
			found, any := 0, false
			for _, g := range it.Gold {
				if slices.ContainsFunc(top, g.matches) {
					found++
					any = true
				}
			}
			for _, a := range it.Alternatives {
				any = any || slices.ContainsFunc(top, a.matches)
			}
			res.Recall[ki] += float64(found) / float64(len(it.Gold))
			if any {
				res.Hit[ki]++
			}
		}
	}
	if res.Items > 0 {
		for i := range ks {
			res.Recall[i] /= float64(res.Items)
			res.Hit[i] /= float64(res.Items)
		}
		slices.Sort(lat)
		res.P50 = lat[len(lat)/2]
		res.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return res
}

// EvalHalf is the fixed half of a development set an item belongs to: 0
// (choosing) or 1 (reporting), by a hash of its id (or query), so the split
// does not depend on the order of the file.
func EvalHalf(it EvalItem) int {
	h := fnv.New32a()
	key := it.ID
	if key == "" {
		key = it.Query
	}
	h.Write([]byte(key))
	return int(h.Sum32() & 1)
}

// EvalSemanticSearch is EvalSearch with the hybrid ranking of s; fallbacks
// counts the searches whose query could not be embedded (BM25F only).
func EvalSemanticSearch(ctx context.Context, s *SemanticIndex, fallbacks *int) func(string, int) []Tool {
	return func(q string, k int) []Tool {
		res := s.Search(ctx, q, SearchOptions{Limit: k})
		if res.SemanticErr != nil {
			*fallbacks++
		}
		out := make([]Tool, len(res.Hits))
		for i, h := range res.Hits {
			out[i] = h.Tool
		}
		return out
	}
}

// EvalSearch is the search the loop runs for one search_tools call with
// the whole request as the query, as a function for Evaluate.
func EvalSearch(r *Registry) func(string, int) []Tool {
	return func(q string, k int) []Tool {
		res := r.Index().Search(q, SearchOptions{Limit: k})
		out := make([]Tool, len(res.Hits))
		for i, h := range res.Hits {
			out[i] = h.Tool
		}
		return out
	}
}
