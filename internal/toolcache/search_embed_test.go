package toolcache

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/llm"
)

// conceptVector is a toy embedding: each word counts in the dimension of
// its concept (words of one concept share it), so texts about the same
// thing in different words are close, which BM25 cannot see.
func conceptVector(text string) []float32 {
	concepts := map[string]string{"painting": "art", "paintings": "art", "artwork": "art", "museum": "art",
		"song": "music", "songs": "music", "melody": "music", "tune": "music"}
	v := make([]float32, 32)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return r < 'a' || r > 'z' }) {
		if c, ok := concepts[w]; ok {
			w = c
		}
		h := fnv.New32a()
		h.Write([]byte(w))
		v[h.Sum32()%32]++
	}
	return v
}

// fakeEmbedder embeds with conceptVector, counting the texts it was asked
// for; fail makes it fail.
type fakeEmbedder struct {
	texts atomic.Int32
	fail  atomic.Bool
}

func (e *fakeEmbedder) Model() string { return "concepts-1" }

func (e *fakeEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	if e.fail.Load() {
		return nil, errors.New("endpoint down")
	}
	e.texts.Add(int32(len(texts)))
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = conceptVector(t)
	}
	return out, nil
}

func semanticCatalog() []Tool {
	return NewRegistry(
		[]Tool{{Server: "museum", Original: "search_collection", Description: "Find paintings and other objects in the collection."}},
		[]Tool{{Server: "museum", Original: "get_object", Description: "Details of one object of the collection."}},
		[]Tool{{Server: "radio", Original: "identify", Description: "Name the song that is playing."}},
		[]Tool{{Server: "fs", Original: "read_file", Description: "Read a file."}},
		[]Tool{{Server: "fs", Original: "write_file", Description: "Write a file."}},
	).List()
}

func names(res SearchResult) []string {
	var out []string
	for _, h := range res.Hits {
		out = append(out, h.Tool.Original)
	}
	return out
}

// Tool vectors are computed once per text and model: a second index over
// the same store embeds nothing; the hybrid ranking finds what no word of
// the request names, keeps an exact name first, honours the filter and
// the server option, and falls back to BM25F, saying why, when the query
// cannot be embedded.
func TestSemanticSearch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	tools := semanticCatalog()
	emb := &fakeEmbedder{}
	store := &MemoryVectorStore{}
	s, err := EmbedIndex(ctx, NewSearchIndex(tools), emb, store)
	if err != nil {
		t.Fatal(err)
	}
	if emb.texts.Load() != int32(len(tools)) || store.Len() != len(tools) {
		t.Fatalf("embedded %d texts, stored %d, for %d tools", emb.texts.Load(), store.Len(), len(tools))
	}
	if _, err := EmbedIndex(ctx, NewSearchIndex(tools), emb, store); err != nil || emb.texts.Load() != int32(len(tools)) {
		t.Errorf("second index: %v, embedded %d texts in all (want none more)", err, emb.texts.Load())
	}

	lexical := s.Index().Search("an artwork", SearchOptions{Limit: 3})
	res := s.Search(ctx, "an artwork", SearchOptions{Limit: 3})
	if !lexical.Fallback || res.Fallback || res.SemanticErr != nil || len(res.Hits) == 0 || res.Hits[0].Tool.Original != "search_collection" {
		t.Errorf("artwork: lexical %v (fallback %v), hybrid %v (fallback %v, %v); want search_collection first from the vectors",
			names(lexical), lexical.Fallback, names(res), res.Fallback, res.SemanticErr)
	}
	if res := s.Search(ctx, "write_file", SearchOptions{Limit: 3}); len(res.Hits) == 0 || res.Hits[0].Tool.Original != "write_file" {
		t.Errorf("exact name: %v", names(res))
	}
	if res := s.Search(ctx, "a melody", SearchOptions{Limit: 5, Server: "fs"}); slices.Contains(names(res), "identify") {
		t.Errorf("server option ignored: %v", names(res))
	}
	f := s.Index().Filter(func(t Tool) bool { return t.Server != "radio" })
	if res := s.Search(ctx, "a melody", SearchOptions{Limit: 5, Filter: f}); slices.Contains(names(res), "identify") {
		t.Errorf("filter ignored: %v", names(res))
	}
	if res := s.Search(ctx, "a melody", SearchOptions{Limit: 1}); len(res.Hits) != 1 || res.Hits[0].Tool.Original != "identify" {
		t.Errorf("melody: %v", names(res))
	}

	emb.fail.Store(true)
	res = s.Search(ctx, "read a file", SearchOptions{Limit: 2})
	want := s.Index().Search("read a file", SearchOptions{Limit: 2})
	if res.SemanticErr == nil || !slices.Equal(names(res), names(want)) {
		t.Errorf("embedder down: %v, err %v; want BM25F's %v with the error", names(res), res.SemanticErr, names(want))
	}
	if _, err := EmbedIndex(ctx, NewSearchIndex(tools), emb, nil); err == nil {
		t.Error("EmbedIndex without a working embedder and store succeeded")
	}
}

// The vector weight decides between the rankings where they disagree: at
// the least weight the order is BM25F's, at the most the vectors'; a
// weight out of range is refused.
func TestSemanticVectorWeight(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := EmbedIndex(ctx, NewSearchIndex(semanticCatalog()), &fakeEmbedder{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// "read" and "file" name read_file; the vectors see a painting (art)
	// in the collection's description.
	const q = "read about this painting in a file of the museum collection"
	lexical := names(s.Index().Search(q, SearchOptions{Limit: 5}))
	qv := conceptVector(q)
	var vecFirst string
	best := float32(-1)
	for i, v := range s.vecs {
		if d := dot(unit(qv), v); d > best {
			best, vecFirst = d, s.ix.tools[i].Original
		}
	}
	if len(lexical) == 0 || lexical[0] == vecFirst {
		t.Fatalf("the rankings agree (%v, vectors: %s first): the query tests nothing", lexical, vecFirst)
	}
	for _, tc := range []struct {
		w     float64
		first string
	}{{0.001, lexical[0]}, {DefaultVectorWeight, ""}, {MaxVectorWeight, vecFirst}} {
		ws, err := s.WithVectorWeight(tc.w)
		if err != nil {
			t.Fatalf("weight %v: %v", tc.w, err)
		}
		got := names(ws.Search(ctx, q, SearchOptions{Limit: 5}))
		if tc.first != "" && (len(got) == 0 || got[0] != tc.first) {
			t.Errorf("weight %v: %v, want %s first", tc.w, got, tc.first)
		}
	}
	for _, w := range []float64{0, -1, MaxVectorWeight + 1, math.NaN(), math.Inf(1)} {
		if _, err := s.WithVectorWeight(w); err == nil {
			t.Errorf("weight %v accepted", w)
		}
	}
}

// The same through llm.Embedder against a scripted /v1/embeddings
// server: tool vectors in batches, one request per query, and the
// fallback when the server starts failing.
func TestSemanticSearchOverHTTP(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var requests []int // inputs per request
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusBadRequest)
			return
		}
		var req struct {
			Input []string `json:"input"`
			Model string   `json:"model"`
		}
		if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil || req.Model != "concepts-http" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		requests = append(requests, len(req.Input))
		mu.Unlock()
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var data []item
		for i, in := range req.Input {
			data = append(data, item{i, conceptVector(in)})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
	}))
	t.Cleanup(srv.Close)
	emb, err := llm.NewEmbedder(llm.Config{BaseURL: srv.URL + "/v1", HTTPClient: srv.Client(),
		MaxRetries: -1, MaxRetryDelay: 10 * time.Millisecond}, "concepts-http")
	if err != nil {
		t.Fatal(err)
	}
	tools := semanticCatalog()
	s, err := EmbedIndex(t.Context(), NewSearchIndex(tools), emb, &MemoryVectorStore{})
	if err != nil {
		t.Fatal(err)
	}
	if res := s.Search(t.Context(), "which tune is this", SearchOptions{Limit: 1}); len(res.Hits) != 1 || res.Hits[0].Tool.Original != "identify" || res.SemanticErr != nil {
		t.Errorf("tune: %v, %v", names(res), res.SemanticErr)
	}
	mu.Lock()
	if !slices.Equal(requests, []int{len(tools), 1}) {
		t.Errorf("requests carried %v inputs, want all tools in one, then the query", requests)
	}
	mu.Unlock()
	down.Store(true)
	if res := s.Search(t.Context(), "read a file", SearchOptions{Limit: 1}); res.SemanticErr == nil || !errors.Is(res.SemanticErr, llm.ErrNonRetryable) || len(res.Hits) != 1 {
		t.Errorf("server failing: %v, %v; want BM25F's answer and the error", names(res), res.SemanticErr)
	}
}

func TestVectorCodec(t *testing.T) {
	t.Parallel()
	v := []float32{1.5, -2, 0, 3.25e-7}
	got, err := DecodeVector(EncodeVector(v))
	if err != nil || !slices.Equal(got, v) {
		t.Errorf("round trip %v: %v, %v", v, got, err)
	}
	if _, err := DecodeVector([]byte{1, 2, 3}); err == nil {
		t.Error("3 bytes decoded")
	}
	if a, b := VectorKey("m", "text"), VectorKey("m2", "text"); a == b || len(a) != 64 || strings.Trim(a, "0123456789abcdef") != "" {
		t.Errorf("keys %q %q", a, b)
	}
}
