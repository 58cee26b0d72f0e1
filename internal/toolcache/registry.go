package toolcache

import (
	"sort"
	"sync"
	"sync/atomic"
)

// Registry is one catalog of tools across servers. It is safe for concurrent
// use; readers see a consistent snapshot while the pool swaps in a new one
// after a server's tool list changes.
type Registry struct {
	snap atomic.Pointer[snapshot]

	mu        sync.Mutex
	listeners []func()
	// semantic computes each version's hybrid index (Pool.EnableSemantic);
	// nil: BM25F only.
	semantic *semanticBuilder
}

// snapshot is an immutable tool list, sorted by Name: one catalog version.
// Its search index is built once and shared by every job (see Index).
type snapshot struct {
	tools  []Tool
	byName map[string]int
	// version is unique to this snapshot (see Registry.Version).
	version uint64
	// formerly maps a name an earlier version gave a tool that this one
	// names otherwise to its name now (see Registry.renamed).
	formerly map[string]string
	// removed maps a name an earlier version gave a tool that this one no
	// longer lists (its server's list dropped it) to that tool (see
	// Registry.removedTool).
	removed map[string]Tool

	indexOnce sync.Once
	index     *SearchIndex
	// semantic is this version's hybrid index over index, published once
	// its tool vectors are all computed (nil until then, when computing
	// them failed, or without Pool.EnableSemantic).
	semantic atomic.Pointer[SemanticIndex]
}

// snapshotVersions numbers snapshots across every registry of the process.
var snapshotVersions atomic.Uint64

func newSnapshot(tools []Tool) *snapshot {
	sorted := append([]Tool(nil), tools...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	s := &snapshot{tools: sorted, byName: make(map[string]int, len(sorted)), version: snapshotVersions.Add(1)}
	for i, t := range sorted {
		s.byName[t.Name] = i
	}
	return s
}

func (s *snapshot) searchIndex() *SearchIndex {
	s.indexOnce.Do(func() { s.index = NewSearchIndex(s.tools) })
	return s.index
}

// NewRegistry builds a registry from tool lists without connecting to
// anything (e.g. from LoadCatalog), naming the tools as the pool would:
// server-qualified on clashes, fitted to ^[a-zA-Z0-9_-]{1,64}$. Each tool's
// Server and Original must be set; Name is recomputed.
func NewRegistry(lists ...[]Tool) *Registry {
	var all []Tool
	for _, l := range lists {
		all = append(all, l...)
	}
	all = append([]Tool(nil), all...)
	for i := range all {
		if all[i].Original == "" {
			all[i].Original = all[i].Name
		}
	}
	assignNames(all)
	r := &Registry{}
	r.snap.Store(newSnapshot(all))
	return r
}

// newEmptyRegistry is the pool's registry before any server has answered.
func newEmptyRegistry() *Registry {
	r := &Registry{}
	r.snap.Store(newSnapshot(nil))
	return r
}

// replace swaps in a new snapshot of already-named tools and tells the
// listeners.
func (r *Registry) replace(tools []Tool) {
	s := newSnapshot(tools)
	s.formerly = formerNames(r.current(), s)
	s.removed = removedNames(r.current(), s)
	r.snap.Store(s)
	// The new version's index is built now, once, off the pool's
	// goroutine; a search that comes first waits for the same build.
	go s.searchIndex()
	r.mu.Lock()
	ls := append([]func(){}, r.listeners...)
	sem := r.semantic
	r.mu.Unlock()
	if sem != nil {
		sem.start(s) // its tool vectors, in the background
	}
	for _, f := range ls {
		f()
	}
}

func (r *Registry) current() *snapshot { return r.snap.Load() }

// formerNames is s.formerly after old: each name old gave a tool (or knew
// as a former name of one) that s names otherwise, mapped to the tool's
// name in s. A name s gives to a tool is never a former name, and a tool
// s no longer lists has none. At most a few per tool are kept, so a
// server renaming without end cannot grow it.
func formerNames(old, s *snapshot) map[string]string {
	if old == nil {
		return nil
	}
	type key struct{ server, original string }
	now := make(map[key]string, len(s.tools))
	for _, t := range s.tools {
		now[key{t.Server, t.Original}] = t.Name
	}
	limit := 4*len(s.tools) + 16
	var out map[string]string
	add := func(name string, t Tool) {
		if _, current := s.byName[name]; current || len(out) >= limit {
			return
		}
		if to, ok := now[key{t.Server, t.Original}]; ok && to != name {
			if out == nil {
				out = map[string]string{}
			}
			out[name] = to
		}
	}
	for _, t := range old.tools {
		add(t.Name, t)
	}
	for name, was := range old.formerly {
		if i, ok := old.byName[was]; ok {
			add(name, old.tools[i])
		}
	}
	return out
}

// removedNames is s.removed after old: each name old gave a tool (or
// knew as removed) that s neither gives a tool nor knows as a former name,
// when s lists no tool of that server and original name, mapped to the
// tool. Bounded as formerNames is, so a server adding and dropping
// tools without end cannot grow it.
func removedNames(old, s *snapshot) map[string]Tool {
	if old == nil {
		return nil
	}
	type key struct{ server, original string }
	now := make(map[key]bool, len(s.tools))
	for _, t := range s.tools {
		now[key{t.Server, t.Original}] = true
	}
	limit := 4*max(len(s.tools), len(old.tools)) + 16
	var out map[string]Tool
	add := func(name string, t Tool) {
		if _, current := s.byName[name]; current || len(out) >= limit {
			return
		}
		if _, renamed := s.formerly[name]; renamed {
			return
		}
		if out == nil {
			out = map[string]Tool{}
		}
		out[name] = t
	}
	for _, t := range old.tools {
		if !now[key{t.Server, t.Original}] {
			add(t.Name, t)
		}
	}
	for _, name := range sortedKeys(old.removed) { // the same ones kept at the bound, run after run
		add(name, old.removed[name])
	}
	return out
}

// removedTool returns the tool an earlier catalog version called name,
// when the current one no longer lists it.
func (r *Registry) removedTool(name string) (Tool, bool) {
	t, ok := r.current().removed[name]
	return t, ok
}

// renamed returns the tool an earlier catalog version called name, when
// the current one lists it under another name: a tool another server's
// new tool of the same name made server-qualified while a job that was
// offered the old name runs.
func (r *Registry) renamed(name string) (Tool, bool) {
	s := r.current()
	to, ok := s.formerly[name]
	if !ok {
		return Tool{}, false
	}
	i, ok := s.byName[to]
	if !ok {
		return Tool{}, false
	}
	return s.tools[i], true
}

// Version identifies the current catalog version: it changes whenever the
// catalog does, and no two catalog versions of any registries of the
// process share one, so work derived from a catalog can be kept under it.
func (r *Registry) Version() uint64 { return r.current().version }

// Count is the number of tools.
func (r *Registry) Count() int { return len(r.current().tools) }

// Names lists the tool names, sorted.
func (r *Registry) Names() []string {
	s := r.current()
	names := make([]string, len(s.tools))
	for i, t := range s.tools {
		names[i] = t.Name
	}
	return names
}

// Has reports whether a tool of that (model-facing) name exists.
func (r *Registry) Has(name string) bool {
	_, ok := r.current().byName[name]
	return ok
}

// Get returns the tool of that (model-facing) name.
func (r *Registry) Get(name string) (Tool, bool) {
	s := r.current()
	i, ok := s.byName[name]
	if !ok {
		return Tool{}, false
	}
	return s.tools[i], true
}

// List returns every tool, sorted by name. The slice is the caller's.
func (r *Registry) List() []Tool {
	return append([]Tool(nil), r.current().tools...)
}

// Index is the search index of the current catalog version: built once per
// version (after a server connects, reconnects, announces list_changed or is
// resynced) and shared by every caller; filter it for a job with
// SearchIndex.Filter.
func (r *Registry) Index() *SearchIndex { return r.current().searchIndex() }

// Semantic is the hybrid index of the current catalog version (over
// Index), or nil: while its tool vectors are being computed, when
// computing them failed, or without Pool.EnableSemantic.
func (r *Registry) Semantic() *SemanticIndex { return r.current().semantic.Load() }

// Search ranks tools for a free-text query (see SearchIndex.Search: BM25F
// over name, title, description, parameters and server, stemmed, with
// synonyms, typo tolerance on names and server-level evidence). At most
// limit tools are returned (limit <= 0: 10); none when no query word
// matches (search_tools answers with a fallback then).
func (r *Registry) Search(query string, limit int) []Tool {
	res := r.Index().Search(query, SearchOptions{Limit: limit, NoFallback: true})
	out := make([]Tool, len(res.Hits))
	for i, h := range res.Hits {
		out[i] = h.Tool
	}
	return out
}

// OnChange registers f to be called after every change of the catalog (a
// server connected, reconnected or announced notifications/tools/list_changed
// and its list was read again). f runs on the pool's goroutine: keep it short.
func (r *Registry) OnChange(f func()) {
	r.mu.Lock()
	r.listeners = append(r.listeners, f)
	r.mu.Unlock()
}
