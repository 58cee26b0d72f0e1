package toolcache

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
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

// UnmarshalJSON reads a tool as a set may name it: {"tool" or "name",
// "servers" (a list or one name) or "server"}. Without a name it is an
// error: dropped, its item lost a gold tool (or all of them, and was not
// scored) without a word.
func (g *EvalTool) UnmarshalJSON(b []byte) error {
	var raw struct {
		Tool    string          `json:"tool"`
		Name    string          `json:"name"`
		Servers json.RawMessage `json:"servers"`
		Server  string          `json:"server"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("want {\"tool\", \"servers\"}: %s", jsonErr(err))
	}
	*g = EvalTool{Tool: cmp.Or(raw.Tool, raw.Name)}
	if strings.TrimSpace(g.Tool) == "" {
		return fmt.Errorf(`%s: no "tool" (or "name")`, cut(string(b), 200))
	}
	if raw.Server != "" {
		g.Servers = []string{raw.Server}
	}
	if !isNull(raw.Servers) {
		var one string
		if json.Unmarshal(raw.Servers, &one) == nil {
			g.Servers = append(g.Servers, one)
		} else if err := json.Unmarshal(raw.Servers, &g.Servers); err != nil {
			return fmt.Errorf("tool %q: \"servers\": want a list of names: %s", g.Tool, jsonErr(err))
		}
	}
	g.Servers = slices.DeleteFunc(g.Servers, func(s string) bool { return s == "" })
	if len(g.Servers) == 0 {
		g.Servers = nil
	}
	return nil
}

// jsonErr is an encoding/json error without the Go types it names
// ("cannot unmarshal array into Go value of type struct { ID string ...").
func jsonErr(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("%q is a JSON %s", te.Field, te.Value)
		}
		return "a JSON " + te.Value
	}
	return err.Error()
}

// evalJSONKind names the kind of JSON value b starts with.
func evalJSONKind(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// ParseEvalItem reads one item: "query", "gold_tools" (names, or {tool,
// servers} objects), optional "gold" ([{tool, servers}], which says where
// each gold tool lives) and optional "acceptable_alternatives" (names,
// {tool, servers} objects, lists of either, or an object mapping each
// gold tool to its alternatives). A field in none of these forms is an
// error, not dropped.
func ParseEvalItem(line []byte) (EvalItem, error) {
	if k := evalJSONKind(line); k != "an object" {
		return EvalItem{}, fmt.Errorf(`want one JSON object {"query", "gold_tools"} per item, got %s`, k)
	}
	var raw struct {
		ID        json.RawMessage `json:"id"`
		Query     json.RawMessage `json:"query"`
		GoldTools json.RawMessage `json:"gold_tools"`
		Gold      json.RawMessage `json:"gold"`
		Alts      json.RawMessage `json:"acceptable_alternatives"`
	}
	if err := json.Unmarshal(line, &raw); err != nil {
		return EvalItem{}, errors.New(jsonErr(err))
	}
	var it EvalItem
	if !isNull(raw.Query) && json.Unmarshal(raw.Query, &it.Query) != nil {
		return EvalItem{}, fmt.Errorf(`"query" is %s: want the request as a string`, evalJSONKind(raw.Query))
	}
	if strings.TrimSpace(it.Query) == "" {
		// Scored, it would pass for a ranking that found nothing.
		return EvalItem{}, errors.New(`no "query" (or only white space)`)
	}
	if !isNull(raw.ID) && json.Unmarshal(raw.ID, &it.ID) != nil {
		it.ID = string(bytes.TrimSpace(raw.ID)) // a number: as written
	}
	tools := func(field string, m json.RawMessage) ([]EvalTool, error) {
		if isNull(m) {
			return nil, nil
		}
		var one EvalTool
		if json.Unmarshal(m, &one.Tool) == nil {
			if one.Tool == "" {
				return nil, nil
			}
			return []EvalTool{one}, nil
		}
		var list []json.RawMessage
		if err := json.Unmarshal(m, &list); err != nil {
			return nil, fmt.Errorf("%q is %s: want a list of tool names or {\"tool\", \"servers\"} objects", field, evalJSONKind(m))
		}
		var out []EvalTool
		for i, e := range list {
			var g EvalTool
			switch {
			case json.Unmarshal(e, &g.Tool) == nil:
				if g.Tool == "" {
					continue
				}
			case evalJSONKind(e) == "an object":
				if err := json.Unmarshal(e, &g); err != nil {
					return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
				}
			default:
				return nil, fmt.Errorf("%s[%d] is %s: want a tool name or {\"tool\", \"servers\"}", field, i, evalJSONKind(e))
			}
			out = append(out, g)
		}
		return out, nil
	}
	gold, err := tools("gold", raw.Gold)
	if err != nil {
		return EvalItem{}, err
	}
	names, err := tools("gold_tools", raw.GoldTools)
	if err != nil {
		return EvalItem{}, err
	}
	// gold says where the tools of gold_tools live: a name is one gold
	// tool, on any of the servers its entries name (gold may list a name
	// once per server).
	at := map[string]int{}
	for _, g := range gold {
		i, ok := at[g.Tool]
		switch {
		case !ok:
			at[g.Tool] = len(it.Gold)
			it.Gold = append(it.Gold, g)
		case len(it.Gold[i].Servers) == 0 || len(g.Servers) == 0:
			it.Gold[i].Servers = nil
		default:
			for _, srv := range g.Servers {
				if !slices.Contains(it.Gold[i].Servers, srv) {
					it.Gold[i].Servers = append(it.Gold[i].Servers, srv)
				}
			}
		}
	}
	for _, g := range names {
		if _, ok := at[g.Tool]; !ok {
			at[g.Tool] = len(it.Gold)
			it.Gold = append(it.Gold, g)
		}
	}
	var alt func(where string, m json.RawMessage) error
	alt = func(where string, m json.RawMessage) error {
		var s string
		switch evalJSONKind(m) {
		case "null", "nothing":
			return nil
		case "a string":
			if json.Unmarshal(m, &s) == nil && s != "" {
				it.Alternatives = append(it.Alternatives, EvalTool{Tool: s})
			}
			return nil
		case "an array":
			var list []json.RawMessage
			if err := json.Unmarshal(m, &list); err != nil {
				return fmt.Errorf("%s: %s", where, jsonErr(err))
			}
			for i, e := range list {
				if err := alt(fmt.Sprintf("%s[%d]", where, i), e); err != nil {
					return err
				}
			}
			return nil
		case "an object":
			var o map[string]json.RawMessage
			if err := json.Unmarshal(m, &o); err != nil {
				return fmt.Errorf("%s: %s", where, jsonErr(err))
			}
			_, tool := o["tool"]
			_, name := o["name"]
			_, servers := o["servers"]
			_, server := o["server"]
			if list, ok := o["tools"]; ok && !tool && !name {
				return alt(where+".tools", list) // {"tools": [...]}
			}
			if tool || name || servers || server {
				var t EvalTool
				if err := json.Unmarshal(m, &t); err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
				it.Alternatives = append(it.Alternatives, t)
				return nil
			}
			// {"gold tool": alternatives, ...}: hit@k counts any.
			for _, k := range slices.Sorted(maps.Keys(o)) {
				if err := alt(where+"."+k, o[k]); err != nil {
					return err
				}
			}
			return nil
		}
		return fmt.Errorf("%s is %s: want tool names, {\"tool\", \"servers\"} objects or lists of them", where, evalJSONKind(m))
	}
	if err := alt("acceptable_alternatives", raw.Alts); err != nil {
		return EvalItem{}, err
	}
	return it, nil
}

// LoadEvalItems reads a retrieval set: JSON lines (one item a line), or
// any sequence of JSON objects (pretty-printed ones spanning lines), or a
// JSON array of them. Errors name the line the item starts on.
func LoadEvalItems(path string) ([]EvalItem, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("toolcache: read queries: %w", err)
	}
	data = bytes.TrimPrefix(data, utf8BOM) // a byte order mark, as some editors write
	lineAt := func(off int64) int {
		rest := data[off:]
		off += int64(len(rest) - len(bytes.TrimLeft(rest, " \t\r\n")))
		return 1 + bytes.Count(data[:off], []byte("\n"))
	}
	var items []EvalItem
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		start := dec.InputOffset()
		var v json.RawMessage
		if err := dec.Decode(&v); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("toolcache: %s line %d: %w", path, lineAt(start), err)
		}
		elems := []json.RawMessage{v}
		inArray := evalJSONKind(v) == "an array"
		if inArray {
			elems = nil
			_ = json.Unmarshal(v, &elems) // valid JSON: Decode said so
		}
		for i, e := range elems {
			it, err := ParseEvalItem(e)
			if err != nil {
				where := fmt.Sprintf("line %d", lineAt(start))
				if inArray {
					where += fmt.Sprintf(", item %d of the array", i+1)
				}
				return nil, fmt.Errorf("toolcache: %s %s: %w", path, where, err)
			}
			items = append(items, it)
		}
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
