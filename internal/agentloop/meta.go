package agentloop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jetagent/jetagent/internal/textdist"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// searchHit is one search_tools result.
type searchHit struct {
	Name        string `json:"name"`
	Server      string `json:"server,omitempty"`
	Description string `json:"description"`
	// Call is a compact signature, name(param: type, optional?: type), so
	// the model can call the tool without get_tool_details.
	Call string `json:"call"`
}

// toolSearcher is what a ToolSet offers when it searches a shared index
// (toolcache.View: the pool's index of the current catalog version,
// filtered by the job's servers and allow/deny globs; with the hybrid
// ranking once the pool has the version's tool vectors, the query
// embedded within ctx).
type toolSearcher interface {
	SearchToolsContext(ctx context.Context, query string, opts toolcache.SearchOptions) toolcache.SearchResult
}

// searchAnswer is one search_tools answer.
type searchAnswer struct {
	hits     []searchHit
	fallback bool
	weak     bool
	badSrv   bool
	// semanticErr says why the hybrid ranking could not be used (the
	// query could not be embedded): the hits are BM25F's.
	semanticErr error
	// meant is the job's server searched instead of a server filter that
	// named none of the job's; servers, with badSrv, are the job's servers.
	meant   string
	servers []string
	// down are the job's servers that are unavailable, named in a note.
	down []toolcache.ServerStatus
	// added counts the matching tools left out because their servers
	// listed them after the job started (it cannot call them); addedNames
	// are the first of them, named in a note.
	added      int
	addedNames []string
	// unmatched are words of the query no tool of the job has
	// (SearchResult.Unmatched).
	unmatched []string
}

// serverNames are the servers of the job's catalog, sorted.
func (r *registry) serverNames() []string {
	r.serversOnce.Do(func() {
		for _, t := range r.catalog {
			if t.Server != "" && !slices.Contains(r.servers, t.Server) {
				r.servers = append(r.servers, t.Server)
			}
		}
		slices.Sort(r.servers)
	})
	return r.servers
}

// closestServer is the server of srvs that name most likely stands for: a
// typo of it, or else the one server whose name contains name (or is
// contained in it) without regard to case; "" when none or several.
func closestServer(name string, srvs []string) string {
	if len(name) > maxUnknownName { // server names are short; edit distance costs the product of the lengths
		return ""
	}
	if c := textdist.Closest(name, srvs); c != "" {
		return c
	}
	ln := strings.ToLower(name)
	if len(ln) < 3 {
		return ""
	}
	var found string
	for _, s := range srvs {
		ls := strings.ToLower(s)
		if strings.Contains(ls, ln) || strings.Contains(ln, ls) {
			if found != "" {
				return ""
			}
			found = s
		}
	}
	return found
}

// maxServersNamed bounds the servers a note lists.
const maxServersNamed = 20

// searchTools ranks the job's whole catalog. MCP tools are ranked on the
// ToolSet's shared index (no per-job build); the job's client tools and
// resource bridge, a few, are passed as SearchOptions.Extra and scored at
// query time with the shared index's statistics, merged into the same
// ranking. A ToolSet that is not a toolSearcher (tests, other embeddings
// of the loop) gets one index over the job's catalog, built on the job's
// first search.
func (r *registry) searchTools(ctx context.Context, ts ToolSet, query, server string, limit int) searchAnswer {
	if limit <= 0 {
		limit = defaultSearchLimit
	}
	limit = min(limit, maxSearchLimit)
	var meant string
	if server != "" {
		srvs := r.serverNames()
		if !slices.ContainsFunc(srvs, func(s string) bool { return strings.EqualFold(s, server) }) {
			// Not a server of this job (a typo, a part of the name, or one
			// of the pool's that the job was not given): search the one it
			// most likely meant, or say which servers there are.
			if meant = closestServer(server, srvs); meant == "" {
				return searchAnswer{badSrv: true, servers: srvs}
			}
			server = meant
		}
	}
	opts := toolcache.SearchOptions{Limit: limit, Server: server}
	search := func(n int) toolcache.SearchResult {
		opts.Limit = n
		if s, ok := ts.(toolSearcher); ok {
			opts.Extra = r.own
			return s.SearchToolsContext(ctx, query, opts)
		}
		r.searchOnce.Do(func() { r.index = toolcache.NewSearchIndex(r.catalog) })
		return r.index.Search(query, opts)
	}
	// The shared index is the pool's current catalog, which may have
	// changed since the job started (list_changed): its hits are mapped
	// onto the job's own tools, and those the job was not offered (added
	// since) are left out, the search asked again for as many more.
	var a searchAnswer
	for n, tries := limit, 0; ; tries++ {
		res := search(n)
		a = searchAnswer{fallback: res.Fallback, weak: res.Weak, badSrv: res.UnknownServer, semanticErr: res.SemanticErr, meant: meant, unmatched: res.Unmatched}
		skipped := 0
		for _, h := range res.Hits {
			e, ok := r.jobTool(h.Tool)
			if !ok {
				skipped++
				if !res.Fallback { // the closest names are no matches
					a.added++
					if len(a.addedNames) < maxAddedNamed {
						a.addedNames = append(a.addedNames, h.Tool.Name)
					}
				}
				continue
			}
			if len(a.hits) < limit {
				a.hits = append(a.hits, searchHit{
					Name: e.tool.Name, Server: e.tool.Server,
					Description: OneLine(e.tool.Description), Call: r.callForm(e.tool),
				})
			}
		}
		if len(a.hits) >= limit || skipped == 0 || len(res.Hits) < n || tries == maxSearchRetries {
			return a
		}
		n = limit + skipped
	}
}

// maxSearchRetries bounds the searches asked again for hits in place of
// tools the job was not offered; maxAddedNamed bounds those named.
const (
	maxSearchRetries = 3
	maxAddedNamed    = 5
)

// jobTool is the job's entry for a tool of the pool's current catalog:
// the one of its name and server, or, when the catalog renamed it since
// the job started (another server's new tool of the same name made both
// server-qualified), the one of its server and server's own name. false
// for a tool the job was not offered (its server listed it since).
func (r *registry) jobTool(t toolcache.Tool) (*entry, bool) {
	if e, ok := r.byName[t.Name]; ok && e.tool.Server == t.Server {
		return e, true
	}
	if t.Server == "" {
		return nil, false
	}
	r.originsOnce.Do(func() {
		r.origins = map[[2]string]*entry{}
		for _, ct := range r.catalog {
			if e := r.byName[ct.Name]; e != nil && e.kind == kindMCP {
				r.origins[[2]string{ct.Server, ct.Original}] = e
			}
		}
	})
	e, ok := r.origins[[2]string{t.Server, t.Original}]
	return e, ok
}

// text is the answer as the model gets it: a note line when servers are
// unavailable, one when the matches are weak or none matched, then the
// JSON array of hits, best first. The note quotes the query's and the
// server's heads only: a whole long one would push the hits past the
// output cut.
func (a searchAnswer) text(query, server string) string {
	return a.render(query, server, 0, false)
}

// render is text with a note that left more hits were not shown, and when
// compact with shorter notes (no query quoted, unavailable servers
// counted, not named), for an answer at a small output limit.
func (a searchAnswer) render(query, server string, left int, compact bool) string {
	var prefix string
	switch {
	case len(a.down) > 0 && compact:
		prefix = fmt.Sprintf("Note: %d MCP %s unavailable; %s tools are not among these.\n", len(a.down),
			plural(len(a.down), "server is", "servers are"), plural(len(a.down), "its", "their"))
	case len(a.down) > 0:
		prefix = fmt.Sprintf("Note: %s: its tools are not in this job's catalog, so they are not among these.\n", downList(a.down))
	}
	switch {
	case a.added > 0 && compact:
		prefix += fmt.Sprintf("Note: %d matching %s listed after this job started; this job cannot call %s.\n", a.added,
			plural(a.added, "tool was", "tools were"), plural(a.added, "it", "them"))
	case a.added > 0:
		quoted := make([]string, len(a.addedNames))
		for i, n := range a.addedNames {
			quoted[i] = quoteN(n, 80)
		}
		if more := a.added - len(a.addedNames); more > 0 {
			quoted = append(quoted, fmt.Sprintf("and %d more", more))
		}
		prefix += fmt.Sprintf("Note: %d more %s (%s), but %s listed by %s after this job started, and a job can call only "+
			"the tools it started with (a new job can call %s).\n", a.added, plural(a.added, "tool matches", "tools match"),
			strings.Join(quoted, ", "), plural(a.added, "it was", "they were"), plural(a.added, "its server", "their servers"),
			plural(a.added, "it", "them"))
	}
	if left > 0 {
		prefix += fmt.Sprintf("Note: %d more %s not fit in the output; ask for fewer (limit) or search with narrower words.\n",
			left, plural(left, "hit does", "hits do"))
	}
	none := len(a.hits) == 0 && left == 0
	var note string
	switch {
	case a.badSrv && none:
		if len(a.servers) == 0 {
			return prefix + fmt.Sprintf("Note: no server of this job is named %s, and this job has no servers; search without server.", quoteHead(server))
		}
		quoted := make([]string, 0, maxServersNamed+1)
		for i, s := range a.servers {
			if i == maxServersNamed {
				quoted = append(quoted, fmt.Sprintf("and %d more", len(a.servers)-maxServersNamed))
				break
			}
			quoted = append(quoted, strconv.Quote(s))
		}
		return prefix + fmt.Sprintf("Note: no server of this job is named %s; its servers: %s.", quoteHead(server), strings.Join(quoted, ", "))
	case a.meant != "" && compact:
		note = fmt.Sprintf("Note: no server is named so; these are the tools of %s.\n", quoteN(a.meant, 40))
	case a.meant != "":
		note = fmt.Sprintf("Note: no server of this job is named %s; did you mean %q? These are its tools.\n", quoteHead(server), a.meant)
		if a.fallback {
			note += "None matches the words of the query; these are the closest names.\n"
		}
	case a.fallback && none:
		return prefix + "Note: no tools are available."
	case a.fallback && strings.TrimSpace(query) == "" && compact:
		note = "Note: the query is empty; these are the first tools by name.\n"
	case a.fallback && strings.TrimSpace(query) == "":
		note = "Note: the query is empty; these are the first tools by name. Search with the words of the request.\n"
	case a.fallback && compact:
		note = "Note: no tool matches the query's words; these are the closest names.\n"
	case a.fallback:
		note = fmt.Sprintf("Note: no tool matches the words of %s; these are the closest names. Try other words.\n", quoteHead(query))
	case len(a.unmatched) > 0 && compact:
		note = fmt.Sprintf("Note: no tool mentions %s.\n", quoteWords(a.unmatched, 24))
	case len(a.unmatched) > 0:
		// Facts, not advice: an unmatched word may be a value (a name, a
		// place) as well as a capability no tool has (a service, a format).
		note = fmt.Sprintf("Note: no tool of this job mentions %s (nor a synonym); these match the other words.\n",
			quoteWords(a.unmatched, 40))
	case a.weak && compact:
		note = "Note: these match only part of the request.\n"
	case a.weak:
		note = "Note: these match only part of the request; search again with the words of one step for better matches.\n"
	}
	hits := a.hits
	if hits == nil {
		hits = []searchHit{}
	}
	return prefix + note + mustJSON(hits)
}

// quoteWords quotes words, each cut at n bytes, joined with commas.
func quoteWords(ws []string, n int) string {
	q := make([]string, len(ws))
	for i, w := range ws {
		q[i] = quoteN(w, n)
	}
	return strings.Join(q, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// quoteN is s quoted, its first n bytes when it is longer.
func quoteN(s string, n int) string {
	if len(s) <= n {
		return strconv.Quote(s)
	}
	return strconv.Quote(cutText(s, n))
}

// fit is text within max bytes (at least 256, MaxToolOutput's floor):
// the best hits that fit with a note of how many more there were; at a
// limit too small for one hit with the notes whole, shorter notes and
// the best hit's description and signature cut; at one too small for
// that, no hit. The hits stay a valid JSON array (cut at the tool output
// limit, mid-hit, they were not).
func (a searchAnswer) fit(query, server string, max int) string {
	text := a.text(query, server)
	if len(text) <= max {
		return text
	}
	if len(a.hits) == 0 {
		// Notes only (a list of servers): no JSON to keep valid.
		return a.render(query, server, 0, true)
	}
	all := a.hits
	with := func(hits []searchHit, compact bool) string {
		b := a
		b.hits = hits
		return b.render(query, server, len(all)-len(hits), compact)
	}
	// The hits' sizes shrink the answer by at least their encoding each.
	n := len(all)
	for n > 1 && len(text) > max {
		over := len(text) - max
		for n > 1 && over > 0 {
			n--
			over -= len(mustJSON(all[n])) + 1
		}
		text = with(all[:n], false)
	}
	if len(text) <= max {
		return text
	}
	// One hit with the short notes, then its signature and description
	// cut to the room left.
	if text = with(all[:1], true); len(text) <= max {
		return text
	}
	h := all[0]
	h.Description, h.Call = "", ""
	if room := max - len(with([]searchHit{h}, true)); room >= 0 {
		h.Call = fitString(all[0].Call, room)
		h.Description = fitString(all[0].Description, room-(len(mustJSON(h.Call))-2))
		if text = with([]searchHit{h}, true); len(text) <= max {
			return text
		}
	}
	if text = with(nil, true); len(text) <= max {
		return text
	}
	return fmt.Sprintf("Note: %d more %s not fit in the output.\n[]", len(all), plural(len(all), "hit does", "hits do"))
}

// fitString is s, or its start cut with "...", whose JSON string encoding
// (quotes left out) is at most room bytes; "" when none is.
func fitString(s string, room int) string {
	enc := func(v string) int { return len(mustJSON(v)) - 2 }
	if enc(s) <= room {
		return s
	}
	lo, hi := 0, len(s) // the longest cut that fits is in [lo, hi)
	for lo+1 < hi {
		mid := (lo + hi) / 2
		if enc(cutText(s, mid)) <= room {
			lo = mid
		} else {
			hi = mid
		}
	}
	if c := cutText(s, lo); lo > 0 && enc(c) <= room {
		return c
	}
	return ""
}

// maxSignature bounds a compact signature.
const maxSignature = 300

// signature is t's compact call signature: its name and signatureParams.
func signature(t toolcache.Tool) string { return t.Name + "(" + signatureParams(t) + ")" }

// signatureParams are t's top-level parameters in the schema's order, with
// types ("a"|"b" for enums, T[] for arrays), "?" on optional ones; when
// the signature would be over maxSignature, the required ones that fit
// and how many are left out (get_tool_details has them all).
func signatureParams(t toolcache.Tool) string {
	var sch struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	_ = json.Unmarshal(parameters(t), &sch)
	var parts []string
	var required []bool
	for _, p := range orderedProps(sch.Properties) {
		req := slices.Contains(sch.Required, p.name)
		opt := "?"
		if req {
			opt = ""
		}
		parts = append(parts, p.name+opt+": "+typeOf(p.schema))
		required = append(required, req)
	}
	all := strings.Join(parts, ", ")
	if len(t.Name)+len(all)+2 <= maxSignature {
		return all
	}
	var keep []string
	n := len(t.Name) + 40
	for i, p := range parts {
		if required[i] && n+len(p) < maxSignature {
			keep = append(keep, p)
			n += len(p) + 2
		}
	}
	return strings.Join(append(keep, fmt.Sprintf("…%d more", len(parts)-len(keep))), ", ")
}

type prop struct {
	name   string
	schema json.RawMessage
}

// orderedProps lists an object's members in their order.
func orderedProps(raw json.RawMessage) []prop {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var out []prop
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if dec.Decode(&v) != nil {
			return out
		}
		out = append(out, prop{name, v})
	}
	return out
}

// typeOf is a short type for a parameter's schema.
func typeOf(raw json.RawMessage) string {
	var s struct {
		Type  json.RawMessage   `json:"type"`
		Enum  []json.RawMessage `json:"enum"`
		Items json.RawMessage   `json:"items"`
		AnyOf []json.RawMessage `json:"anyOf"`
		OneOf []json.RawMessage `json:"oneOf"`
	}
	if json.Unmarshal(raw, &s) != nil {
		return "any"
	}
	if len(s.Enum) > 0 {
		var vs []string
		for i, e := range s.Enum {
			if i == 6 {
				vs = append(vs, "…")
				break
			}
			vs = append(vs, string(e))
		}
		return strings.Join(vs, "|")
	}
	var types []string
	var one string
	if json.Unmarshal(s.Type, &one) == nil && one != "" {
		types = []string{one}
	} else {
		_ = json.Unmarshal(s.Type, &types)
	}
	for _, alt := range append(s.AnyOf, s.OneOf...) {
		if tt := typeOf(alt); tt != "any" && !slices.Contains(types, tt) {
			types = append(types, tt)
		}
	}
	for i, tt := range types {
		if tt == "array" {
			it := "any"
			if len(s.Items) > 0 {
				it = typeOf(s.Items)
			}
			if strings.Contains(it, "|") {
				it = "(" + it + ")"
			}
			types[i] = it + "[]"
		}
	}
	if len(types) == 0 {
		return "any"
	}
	return strings.Join(types, "|")
}

// toolDetails is get_tool_details' answer.
type toolDetails struct {
	Name         string                `json:"name"`
	Title        string                `json:"title,omitempty"`
	Description  string                `json:"description,omitempty"`
	InputSchema  json.RawMessage       `json:"input_schema"`
	OutputSchema json.RawMessage       `json:"output_schema,omitempty"`
	Annotations  toolcache.Annotations `json:"annotations"`
}

func details(t toolcache.Tool) toolDetails {
	return toolDetails{
		Name: t.Name, Title: t.Title, Description: t.Description,
		InputSchema: parameters(t), OutputSchema: t.OutputSchema, Annotations: t.Annotations,
	}
}

// shortDetails is get_tool_details' answer for a tool whose details do
// not fit in the tool output limit: cut there, the schema was invalid
// JSON the model could not read. It keeps every top-level parameter's
// name, type and whether it is required, as far as they fit.
type shortDetails struct {
	Name        string `json:"name"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	// Parameters maps each parameter shown to its type, or to its type and
	// description, in the schema's order.
	Parameters orderedParams `json:"parameters"`
	Required   []string      `json:"required"`
	Omitted    int           `json:"parameters_not_shown,omitempty"`
	Note       string        `json:"note"`
}

type shortParam struct {
	name, typ, desc string
	required        bool
}

// orderedParams encodes as a JSON object in its order (a map would sort).
type orderedParams []shortParam

func (ps orderedParams) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, p := range ps {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, p.encoded()...)
	}
	return append(b, '}'), nil
}

// encoded is p as a member of orderedParams.
func (p shortParam) encoded() []byte {
	k, _ := json.Marshal(p.name)
	var v []byte
	if p.desc != "" {
		v, _ = json.Marshal(struct {
			Type        string `json:"type"`
			Description string `json:"description"`
		}{p.typ, p.desc})
	} else {
		v, _ = json.Marshal(p.typ)
	}
	return append(append(k, ':'), v...)
}

// maxShortType bounds a parameter's type in a shortened answer (an enum
// of long values).
const maxShortType = 60

// detailsText is get_tool_details' answer for t, in at most max bytes:
// its details, or when they are larger, a summary of its parameters
// that is still valid JSON, shortened step by step until it fits.
func detailsText(t toolcache.Tool, max int) string {
	max = maxInt(max, 0) // cutText panics on a negative length
	full := mustJSON(details(t))
	if len(full) <= max {
		return full
	}
	var sch struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	_ = json.Unmarshal(parameters(t), &sch)
	props := orderedProps(sch.Properties)
	params := make(orderedParams, len(props))
	required := []string{}
	for i, p := range props {
		var d struct {
			Description string `json:"description"`
		}
		_ = json.Unmarshal(p.schema, &d)
		params[i] = shortParam{name: p.name, typ: typeOf(p.schema), desc: OneLine(d.Description), required: slices.Contains(sch.Required, p.name)}
		if params[i].required {
			required = append(required, p.name)
		}
	}
	note := fmt.Sprintf("The details (%d bytes) are over the tool output limit, so this is a summary: parameters maps each top-level "+
		"parameter to its type; nested fields, defaults and definitions are left out (and the parameters' descriptions when they do "+
		"not fit). Calls are still validated "+
		"against the full schema, and an invalid call's error says what is wrong.", len(full))
	d := shortDetails{Name: t.Name, Title: t.Title, Description: cutText(t.Description, max/4), Parameters: params, Required: required, Note: note}
	if s := mustJSON(d); len(s) <= max {
		return s
	}
	// Without the parameters' descriptions, the types cut.
	d.Description = OneLine(t.Description)
	for i := range params {
		params[i].desc = ""
		params[i].typ = cutText(params[i].typ, maxShortType)
	}
	if s := mustJSON(d); len(s) <= max {
		// The room left shows more of the description (its encoding can
		// be longer than it: then the first line stays).
		if n := max - len(s) + len(d.Description) - 16; n > len(d.Description) {
			d.Description = cutText(t.Description, n)
			if more := mustJSON(d); len(more) <= max {
				return more
			}
		}
		return s
	}
	// The parameters that fit, required ones first, shown in the schema's
	// order; required lists only those shown.
	d.Parameters, d.Required = orderedParams{}, []string{}
	d.Omitted = len(params)
	d.Note = note + " Not every parameter fits: parameters_not_shown counts those left out (required ones are shown first)."
	room := max - len(mustJSON(d))
	keep := make([]bool, len(params))
fill:
	for _, req := range []bool{true, false} {
		for i, p := range params {
			if p.required != req {
				continue
			}
			n := len(p.encoded()) + 1
			if req {
				n += len(p.name) + 3 // its name in required, quoted, with a comma
			}
			if n > room {
				break fill // no optional one before every required one
			}
			keep[i], room = true, room-n
			d.Omitted--
		}
	}
	for i, p := range params {
		if keep[i] {
			d.Parameters = append(d.Parameters, p)
			if p.required {
				d.Required = append(d.Required, p.name)
			}
		}
	}
	if s := mustJSON(d); len(s) <= max {
		return s
	}
	// A limit too small for even that (at least 256 bytes): the name and why.
	return mustJSON(shortDetails{Name: t.Name, Parameters: orderedParams{}, Required: []string{}, Omitted: len(params),
		Note: "The schema is over the tool output limit; calls are validated against it."})
}

// runMeta answers the job's search_tools and get_tool_details (args
// already valid). A search answered with BM25F because its query could not
// be embedded emits search.semantic_fallback.
func (j *job) runMeta(ctx context.Context, k toolKind, args json.RawMessage) (string, bool) {
	return j.reg.runMeta(ctx, j.in.Tools, k, args, j.l.cfg.MaxToolOutput, func(err error) {
		j.emit(ctx, EventSearchSemanticFallback, j.rounds+1, map[string]any{"error": err.Error()})
	})
}

// runMeta answers search_tools and get_tool_details (args already valid)
// in at most maxOut bytes, as valid JSON (cut at the tool output limit, it
// was not); semanticFallback is told when a search's hybrid ranking fell
// back to BM25F.
func (r *registry) runMeta(ctx context.Context, ts ToolSet, k toolKind, args json.RawMessage, maxOut int, semanticFallback func(error)) (string, bool) {
	switch k {
	case kindSearchTools:
		var a struct {
			Query  string `json:"query"`
			Limit  int    `json:"limit"`
			Server string `json:"server"`
		}
		_ = json.Unmarshal(args, &a)
		var down []toolcache.ServerStatus
		if r.unavailable != nil {
			down = r.unavailable()
		}
		// A server that is down with no tools listed is not in the job's
		// catalog: a search could not find its tools, and one naming it
		// was told the job has no such server.
		if i := slices.IndexFunc(down, func(st toolcache.ServerStatus) bool { return strings.EqualFold(st.Name, a.Server) }); i >= 0 && a.Server != "" {
			return fmt.Sprintf("Note: %s, so none of its tools are in this job's catalog: they cannot be searched or called in this job; "+
				"the worker keeps reconnecting it, and a job started once it is back can.", downWhat(down[i])), false
		}
		ans := r.searchTools(ctx, ts, a.Query, a.Server, a.Limit)
		if ans.semanticErr != nil {
			semanticFallback(ans.semanticErr)
		}
		ans.down = down
		return ans.fit(a.Query, a.Server, maxOut), false
	case kindGetToolDetails:
		var a struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(args, &a)
		e, ok := r.byName[a.Name]
		if !ok {
			if r.code != nil { // the identifier the code uses
				if n, ok2 := r.code.Name(a.Name); ok2 {
					e, ok = r.byName[n]
				}
			}
			if n, ok2 := r.resolveCatalogName(a.Name); !ok && ok2 { // as a call would take it
				e, ok = r.byName[n]
			}
			if !ok {
				return "Error: " + r.unknownToolError(a.Name, false).Error(), true
			}
		}
		if r.code != nil {
			d := r.code.Declarations(e.tool.Name)
			if len(d) <= maxOut {
				return d, false
			}
			// Cut at the limit, the declarations ended mid-interface.
			id, _ := r.code.Ident(e.tool.Name)
			head := fmt.Sprintf("// The TypeScript declarations of tools.%s (%d bytes) are over the tool output limit: "+
				"a summary of its input's top-level parameters follows, as JSON. Call it as await tools.%s({...}).\n", id, len(d), id)
			if rest := maxOut - len(head); rest > 0 {
				if sum := detailsText(e.tool, rest); len(sum) <= rest {
					return head + sum, false
				}
			}
			// A limit near its floor leaves no room for the summary (and
			// with a long identifier none for the head: detailsText was
			// given a negative limit and panicked).
			return fmt.Sprintf("// The TypeScript declarations of tools.%s (%d bytes) are over the tool output limit, and so is a summary; "+
				"calls to it are validated against its full schema.", id, len(d)), false
		}
		return detailsText(e.tool, maxOut), false
	}
	return fmt.Sprintf("Error: tool kind %d is not a meta tool", k), true
}

// runResource answers the resource bridge tools (args already valid).
func runResource(ctx context.Context, ts ToolSet, k toolKind, args json.RawMessage) (string, bool, error) {
	if k == kindListResources {
		res, err := ts.ListResources(ctx)
		if err != nil {
			return "", true, err
		}
		return mustJSON(res), false, nil
	}
	var a struct {
		URI string `json:"uri"`
	}
	_ = json.Unmarshal(args, &a)
	text, err := ts.ReadResource(ctx, a.URI)
	if err != nil {
		return "", true, err
	}
	return text, false, nil
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("Error: encoding result: %v", err)
	}
	return string(b)
}

// callForm is how a search hit is called: its signature, and in code mode
// the expression the code writes (the identifier may differ from the
// name), its parameters in the one object the function takes, as
// execute_code's index shows them: "await tools.x(a: string)" read as
// positional parameters, and a script calling tools.x("Oslo") failed.
func (r *registry) callForm(t toolcache.Tool) string {
	if r.code != nil {
		if id, ok := r.code.Ident(t.Name); ok {
			params := signatureParams(t)
			if params == "" {
				return "await tools." + id + "()"
			}
			return "await tools." + id + "({" + params + "})"
		}
	}
	return signature(t)
}
