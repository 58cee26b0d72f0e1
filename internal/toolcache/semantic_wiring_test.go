package toolcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/llm"
)

// embeddingsServer is a scripted OpenAI-compatible /v1/embeddings
// endpoint that embeds with conceptVector; down makes it fail.
type embeddingsServer struct {
	*httptest.Server
	down atomic.Bool

	mu     sync.Mutex
	inputs []string // every text it was asked for, in order
	calls  int      // requests answered or refused
}

func newEmbeddingsServer(t *testing.T, model string) *embeddingsServer {
	t.Helper()
	e := &embeddingsServer{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.calls++
		e.mu.Unlock()
		if e.down.Load() {
			http.Error(w, `{"error":{"message":"model not loaded","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		var req struct {
			Input []string `json:"input"`
			Model string   `json:"model"`
		}
		if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil || req.Model != model {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		e.mu.Lock()
		e.inputs = append(e.inputs, req.Input...)
		e.mu.Unlock()
		type item struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		data := []item{}
		for i, in := range req.Input {
			data = append(data, item{"embedding", i, conceptVector(in)})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": model,
			"usage": map[string]int{"prompt_tokens": len(req.Input), "total_tokens": len(req.Input)}})
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *embeddingsServer) embedder(t *testing.T, model string) *llm.Embedder {
	t.Helper()
	emb, err := llm.NewEmbedder(llm.Config{BaseURL: e.URL + "/v1", HTTPClient: e.Client(),
		MaxRetries: -1, MaxRetryDelay: 10 * time.Millisecond}, model)
	if err != nil {
		t.Fatal(err)
	}
	return emb
}

// asked counts the texts sent that contain s.
func (e *embeddingsServer) asked(s string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, in := range e.inputs {
		if strings.Contains(in, s) {
			n++
		}
	}
	return n
}

func (e *embeddingsServer) requests() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls
}

// semanticServers are semanticCatalog as three in-process MCP servers.
func semanticServers() (museum *server.MCPServer, opts []Option) {
	mk := func(name string, tools ...[2]string) *server.MCPServer {
		s := server.NewMCPServer(name, "1.0.0", server.WithToolCapabilities(true))
		for _, t := range tools {
			s.AddTool(mcp.NewTool(t[0], mcp.WithDescription(t[1])), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("ok"), nil
			})
		}
		return s
	}
	museum = mk("museum", [2]string{"search_collection", "Find paintings and other objects in the collection."},
		[2]string{"get_object", "Details of one object of the collection."})
	return museum, []Option{
		WithInProcessServer("museum", museum, ServerConfig{}),
		WithInProcessServer("radio", mk("radio", [2]string{"identify", "Name the song that is playing."}), ServerConfig{}),
		WithInProcessServer("fs", mk("fs", [2]string{"read_file", "Read a file."}, [2]string{"write_file", "Write a file."}), ServerConfig{}),
	}
}

// logRecorder is a slog handler that keeps the messages at warn and above.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

func (l *logRecorder) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.Contains(m, substr) {
			n++
		}
	}
	return n
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The pool's search end to end with the hybrid ranking: a real pool of
// in-process MCP servers, llm.Embedder against a scripted /v1/embeddings
// server, an in-memory vector store. Before the vectors are ready the
// search is BM25F's; once they are, a request whose words match no tool
// finds the one its vector is nearest, within each view's selection; a
// new catalog version embeds only the new tool's text; when the endpoint
// fails, the search still answers, with BM25F, and says why.
func TestSemanticSearchEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	es := newEmbeddingsServer(t, "concepts-e2e")
	museum, opts := semanticServers()
	logs := &logRecorder{}
	p := newTestPool(t, Config{}, append(opts, WithLogger(slog.New(logs)))...)
	all := newTestView(t, p, nil, nil, nil)
	if got := p.Registry().Count(); got != 5 {
		t.Fatalf("%d tools, want 5: %+v", got, p.Status())
	}

	before := all.SearchToolsContext(ctx, "an artwork", SearchOptions{Limit: 3})
	if !before.Fallback || before.SemanticErr != nil {
		t.Fatalf("BM25F only: %v (fallback %v, %v); want the fallback, no word matches", names(before), before.Fallback, before.SemanticErr)
	}

	store := &MemoryVectorStore{}
	if err := p.EnableSemantic(SemanticConfig{Embedder: es.embedder(t, "concepts-e2e"), Store: store}); err != nil {
		t.Fatal(err)
	}
	if err := p.EnableSemantic(SemanticConfig{Embedder: es.embedder(t, "concepts-e2e")}); err == nil {
		t.Error("enabled twice")
	}
	waitUntil(t, "the hybrid index", func() bool { return p.Registry().Semantic() != nil })
	if store.Len() != 5 || es.asked("search_collection") != 1 {
		t.Errorf("stored %d vectors, search_collection embedded %d times; want 5 and once", store.Len(), es.asked("search_collection"))
	}

	res := all.SearchToolsContext(ctx, "an artwork", SearchOptions{Limit: 3})
	if res.Fallback || res.SemanticErr != nil || len(res.Hits) == 0 || res.Hits[0].Tool.Original != "search_collection" {
		t.Errorf("hybrid: %v (fallback %v, %v); want search_collection first", names(res), res.Fallback, res.SemanticErr)
	}
	if lex := all.SearchTools("an artwork", SearchOptions{Limit: 3}); !lex.Fallback {
		t.Errorf("SearchTools (no context) is BM25F's: %v", names(lex))
	}
	noMuseum := newTestView(t, p, []string{"radio", "fs"}, nil, nil)
	for _, h := range noMuseum.SearchToolsContext(ctx, "an artwork", SearchOptions{Limit: 5}).Hits {
		if h.Tool.Server == "museum" {
			t.Errorf("a view without museum found %s", h.Tool.Name)
		}
	}
	denied := newTestView(t, p, nil, nil, []string{"identify"})
	if got := names(denied.SearchToolsContext(ctx, "a melody", SearchOptions{Limit: 5})); slices.Contains(got, "identify") {
		t.Errorf("denied tool found: %v", got)
	}
	if got := names(all.SearchToolsContext(ctx, "a melody", SearchOptions{Limit: 1})); !slices.Equal(got, []string{"identify"}) {
		t.Errorf("melody: %v", got)
	}

	// A new catalog version: its index is computed again, from the store
	// but for the new tool.
	old := p.Registry().Semantic()
	museum.AddTool(mcp.NewTool("list_exhibitions", mcp.WithDescription("Current exhibitions of the museum.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("ok"), nil
		})
	waitUntil(t, "the new version's hybrid index", func() bool {
		s := p.Registry().Semantic()
		return s != nil && s != old && s.Index() == p.Registry().Index() && p.Registry().Count() == 6
	})
	if store.Len() != 6 || es.asked("search_collection") != 1 || es.asked("list_exhibitions") != 1 {
		t.Errorf("after the change: %d vectors stored, search_collection embedded %d times, list_exhibitions %d; want 6, 1, 1",
			store.Len(), es.asked("search_collection"), es.asked("list_exhibitions"))
	}

	// The endpoint fails: BM25F's answer, with the reason.
	es.down.Store(true)
	res = all.SearchToolsContext(ctx, "read a file", SearchOptions{Limit: 2})
	want := all.SearchTools("read a file", SearchOptions{Limit: 2})
	if res.SemanticErr == nil || len(res.Hits) == 0 || !slices.Equal(names(res), names(want)) {
		t.Errorf("endpoint down: %v, %v; want BM25F's %v and the error", names(res), res.SemanticErr, names(want))
	}
	if n := logs.count("hybrid ranking unavailable"); n != 0 {
		t.Errorf("%d build warnings, want none", n)
	}
}

// A version whose vectors cannot be computed is searched with BM25F (no
// SemanticErr: nothing was tried per search), logged once, and computed
// again later, when the endpoint works again.
func TestSemanticBuildFailureRetries(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	es := newEmbeddingsServer(t, "concepts-retry")
	es.down.Store(true)
	_, opts := semanticServers()
	logs := &logRecorder{}
	p := newTestPool(t, Config{}, append(opts, WithLogger(slog.New(logs)))...)
	v := newTestView(t, p, nil, nil, nil)
	if err := p.EnableSemantic(SemanticConfig{Embedder: es.embedder(t, "concepts-retry"), Store: &MemoryVectorStore{},
		RetryDelay: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "three failed builds", func() bool { return es.requests() >= 3 })
	if p.Registry().Semantic() != nil {
		t.Fatal("published an index without vectors")
	}
	res := v.SearchToolsContext(ctx, "read a file", SearchOptions{Limit: 2})
	if res.SemanticErr != nil || !slices.Equal(names(res), names(v.SearchTools("read a file", SearchOptions{Limit: 2}))) {
		t.Errorf("before the vectors: %v, %v; want BM25F's answer", names(res), res.SemanticErr)
	}
	es.down.Store(false)
	waitUntil(t, "the hybrid index after the endpoint recovered", func() bool { return p.Registry().Semantic() != nil })
	if n := logs.count("hybrid ranking unavailable"); n != 1 {
		t.Errorf("%d warnings for one catalog version, want 1 (%v)", n, logs.msgs)
	}
	if got := names(v.SearchToolsContext(ctx, "an artwork", SearchOptions{Limit: 1})); !slices.Equal(got, []string{"search_collection"}) {
		t.Errorf("after recovery: %v", got)
	}
}

// blockingEmbedder blocks until its context ends.
type blockingEmbedder struct {
	started chan struct{}
	once    sync.Once
	ended   atomic.Bool
}

func (b *blockingEmbedder) Model() string { return "blocking" }
func (b *blockingEmbedder) Embed(ctx context.Context, _ []string) ([][]float32, error) {
	b.once.Do(func() { close(b.started) })
	<-ctx.Done()
	b.ended.Store(true)
	return nil, ctx.Err()
}

// Close stops a build in progress and waits for it (TestMain's goleak
// check would see it otherwise).
func TestSemanticCloseStopsBuild(t *testing.T) {
	t.Parallel()
	_, opts := semanticServers()
	p := newTestPool(t, Config{}, append(opts, WithLogger(discardLogger()))...)
	emb := &blockingEmbedder{started: make(chan struct{})}
	if err := p.EnableSemantic(SemanticConfig{Embedder: emb}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-emb.started:
	case <-time.After(20 * time.Second):
		t.Fatal("no build started")
	}
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not stop the build")
	}
	if !emb.ended.Load() {
		t.Error("Close returned before the build ended")
	}
	if err := p.EnableSemantic(SemanticConfig{Embedder: emb}); err == nil {
		t.Error("enabled twice")
	}
}

// countingStore is a VectorStore that is slow and counts reads in flight.
type countingStore struct {
	MemoryVectorStore
	in, most atomic.Int32
	failPut  bool
}

func (c *countingStore) Get(ctx context.Context, key string) ([]float32, bool, error) {
	n := c.in.Add(1)
	defer c.in.Add(-1)
	for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
	}
	time.Sleep(time.Millisecond)
	return c.MemoryVectorStore.Get(ctx, key)
}

func (c *countingStore) Put(ctx context.Context, key string, v []float32) error {
	if c.failPut {
		return errors.New("bucket full")
	}
	return c.MemoryVectorStore.Put(ctx, key, v)
}

// concurrentEmbedder is fakeEmbedder counting Embed calls in flight.
type concurrentEmbedder struct {
	fakeEmbedder
	in, most, calls atomic.Int32
}

func (c *concurrentEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	n := c.in.Add(1)
	defer c.in.Add(-1)
	c.calls.Add(1)
	for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
	}
	time.Sleep(5 * time.Millisecond)
	return c.fakeEmbedder.Embed(ctx, texts)
}

// A version's vectors are read, embedded and stored at most Concurrency
// at a time, one text once however many tools share it, batches of 128;
// a failed store write leaves the index usable.
func TestSemanticComputeBounded(t *testing.T) {
	t.Parallel()
	var tools []Tool
	for i := range 300 {
		tools = append(tools, Tool{Name: fmt.Sprintf("t%03d", i), Server: "s", Original: fmt.Sprintf("t%03d", i),
			Description: "A painting tool."})
	}
	tools = append(tools, Tool{Name: "dup", Server: "s", Original: "t000", Description: "A painting tool."}) // t000's text
	ix := NewSearchIndex(tools)
	emb := &concurrentEmbedder{}
	store := &countingStore{}
	b := &semanticBuilder{cfg: SemanticConfig{Embedder: emb, Store: store, Concurrency: 3}, query: emb}
	sem, st, err := b.compute(t.Context(), ix)
	if err != nil {
		t.Fatal(err)
	}
	if st.embedded != 300 || emb.texts.Load() != 300 || emb.calls.Load() != 3 || store.Len() != 300 {
		t.Errorf("embedded %d (%d texts in %d calls), stored %d; want 300 texts in 3 batches, all stored",
			st.embedded, emb.texts.Load(), emb.calls.Load(), store.Len())
	}
	// The bound is what matters (how many overlap on a busy machine is
	// the scheduler's business).
	if m := emb.most.Load(); m < 1 || m > 3 {
		t.Errorf("%d embedding calls at once, want at most 3", m)
	}
	if m := store.most.Load(); m < 1 || m > 3 {
		t.Errorf("%d store reads at once, want at most 3", m)
	}
	if res := sem.Search(t.Context(), "an artwork", SearchOptions{Limit: 1}); len(res.Hits) != 1 || res.SemanticErr != nil {
		t.Errorf("search: %v, %v", names(res), res.SemanticErr)
	}

	// Read back from the store: nothing embedded.
	before := emb.texts.Load() // the tools and one query
	sem2, st, err := b.compute(t.Context(), ix)
	if err != nil || st.stored != 300 || st.embedded != 0 || emb.texts.Load() != before || sem2 == nil {
		t.Errorf("second build: %v, %+v, %d texts embedded (want none)", err, st, emb.texts.Load()-before)
	}

	// A store that refuses writes: the index is still built.
	failing := &semanticBuilder{cfg: SemanticConfig{Embedder: emb, Store: &countingStore{failPut: true}, Concurrency: 2}, query: emb}
	if sem, st, err := failing.compute(t.Context(), ix); err != nil || sem == nil || st.putFailed != 300 || st.putErr == nil {
		t.Errorf("store refusing writes: %v, %+v", err, st)
	}
	// An embedder that fails fails the build.
	emb.fail.Store(true)
	if _, _, err := (&semanticBuilder{cfg: SemanticConfig{Embedder: emb, Concurrency: 2}, query: emb}).compute(t.Context(), ix); err == nil {
		t.Error("a failing embedder built an index")
	}
}

func TestForEachStopsAtFirstError(t *testing.T) {
	t.Parallel()
	var ran atomic.Int32
	boom := errors.New("boom")
	// Items after the failing one hold their slot until the cancellation,
	// so how many run does not depend on scheduling: the four before it
	// and at most one per slot after.
	err := forEach(t.Context(), 2, 1000, func(ctx context.Context, i int) error {
		ran.Add(1)
		switch {
		case i == 3:
			return boom
		case i > 3:
			<-ctx.Done()
		}
		return nil
	})
	if !errors.Is(err, boom) || ran.Load() > 6 {
		t.Errorf("err %v after %d calls", err, ran.Load())
	}
	if err := forEach(t.Context(), 4, 0, nil); err != nil {
		t.Error(err)
	}
}
