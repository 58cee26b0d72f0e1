package toolcache

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
)

// Optional semantic retrieval: tool vectors from an embedding model,
// computed once per tool text and model and kept in a VectorStore that
// workers share; a query vector per search; the ranking is the
// reciprocal-rank fusion of the BM25F ranking and the vector ranking.
// When the query cannot be embedded the answer is the BM25F one, with
// SearchResult.SemanticErr saying why.

// Embedder turns texts into vectors, one per text, in order (llm.Embedder
// is one).
type Embedder interface {
	Model() string
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// VectorStore keeps vectors by key (VectorKey: a hash of the model and the
// text), e.g. a NATS KV bucket shared by every worker. Get reports ok
// false for a key it does not have.
type VectorStore interface {
	Get(ctx context.Context, key string) (v []float32, ok bool, err error)
	Put(ctx context.Context, key string, v []float32) error
}

// VectorKey is the store key of text's vector under model: the hex SHA-256
// of both (letters and digits only, valid as a NATS KV key).
func VectorKey(model, text string) string {
	h := sha256.New()
	h.Write([]byte(model))
	h.Write([]byte{0})
	h.Write([]byte(text))
	return hex.EncodeToString(h.Sum(nil))
}

// EncodeVector is v as little-endian float32s, for a store's value.
func EncodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// DecodeVector reads EncodeVector's bytes.
func DecodeVector(b []byte) ([]float32, error) {
	if len(b)%4 != 0 || len(b) == 0 {
		return nil, fmt.Errorf("toolcache: a vector of %d bytes", len(b))
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}

// MemoryVectorStore is a VectorStore in the process's memory.
type MemoryVectorStore struct {
	mu sync.Mutex
	m  map[string][]float32
}

// Get returns the vector stored under key.
func (s *MemoryVectorStore) Get(_ context.Context, key string) ([]float32, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	return v, ok, nil
}

// Put stores v under key.
func (s *MemoryVectorStore) Put(_ context.Context, key string, v []float32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string][]float32{}
	}
	s.m[key] = v
	return nil
}

// Len is the number of vectors stored.
func (s *MemoryVectorStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// embedText is the text of a tool that is embedded: its server, name,
// title, description and parameter names, at most maxEmbedText bytes.
func embedText(t *Tool) string {
	name := t.Original
	if name == "" {
		name = t.Name
	}
	var b strings.Builder
	b.WriteString(t.Server)
	b.WriteString(": ")
	b.WriteString(name)
	if t.Title != "" {
		b.WriteString(" (" + t.Title + ")")
	}
	if t.Description != "" {
		b.WriteString(". ")
		b.WriteString(t.Description)
	}
	if names, _ := params(t.InputSchema); len(names) > 0 {
		b.WriteString(" Parameters: ")
		b.WriteString(strings.Join(names, ", "))
	}
	return cut(b.String(), maxEmbedText)
}

// maxEmbedText bounds a tool's embedded text (about 1,000 tokens: well
// under the input limit of embedding models).
const maxEmbedText = 4000

// maxQueryEmbedText bounds the embedded part of a request.
const maxQueryEmbedText = 8000

// rrfK is reciprocal-rank fusion's constant (Cormack et al. 2009): a
// tool's fused score is the sum over the rankings of 1/(rrfK + rank).
const rrfK = 60

// fuseDepth is how deep each ranking is fused.
const fuseDepth = 100

// DefaultVectorWeight is the vector ranking's weight in the fusion, the
// BM25F ranking's being 1. How much a model's vectors should count depends
// on the model (docs/BENCHMARKS.md: with a weak encoder, less than BM25F),
// so it is a setting, to be chosen with search-eval --embed-weight.
const DefaultVectorWeight = 1

// MaxVectorWeight bounds the vector weight: beyond it BM25F only breaks
// ties.
const MaxVectorWeight = 100

// SemanticIndex is a SearchIndex with a vector per tool. It is immutable
// and safe for concurrent use.
type SemanticIndex struct {
	ix    *SearchIndex
	emb   Embedder
	vecs  [][]float32 // by tool, unit length
	dim   int
	model string
	// weight is the vector ranking's weight in the fusion.
	weight float64
}

// WithVectorWeight is s with the vector ranking weighted w in the fusion
// (the BM25F ranking 1); w must be in (0, MaxVectorWeight].
func (s *SemanticIndex) WithVectorWeight(w float64) (*SemanticIndex, error) {
	if err := CheckVectorWeight(w); err != nil {
		return nil, err
	}
	c := *s
	c.weight = w
	return &c, nil
}

// CheckVectorWeight says whether w can weigh the vector ranking.
func CheckVectorWeight(w float64) error {
	if !(w > 0 && w <= MaxVectorWeight) { // also refuses NaN
		return fmt.Errorf("toolcache: vector weight %v: want more than 0 and at most %d", w, MaxVectorWeight)
	}
	return nil
}

// Index is the lexical index underneath.
func (s *SemanticIndex) Index() *SearchIndex { return s.ix }

// EmbedIndex computes the vector of every tool of ix: read from store
// when a worker has already computed it (nil store: none), else embedded
// and written to store. Do it once per catalog version, off the search
// path; it fails when the embedder does.
func EmbedIndex(ctx context.Context, ix *SearchIndex, emb Embedder, store VectorStore) (*SemanticIndex, error) {
	s := &SemanticIndex{ix: ix, emb: emb, model: emb.Model(), vecs: make([][]float32, len(ix.tools)), weight: DefaultVectorWeight}
	texts := make([]string, len(ix.tools))
	var missing []int
	for i := range ix.tools {
		texts[i] = embedText(&ix.tools[i])
		if store != nil {
			v, ok, err := store.Get(ctx, VectorKey(s.model, texts[i]))
			if err != nil {
				return nil, fmt.Errorf("toolcache: reading tool vectors: %w", err)
			}
			if ok {
				s.vecs[i] = v
				continue
			}
		}
		missing = append(missing, i)
	}
	if len(missing) > 0 {
		batch := make([]string, len(missing))
		for j, i := range missing {
			batch[j] = texts[i]
		}
		vecs, err := emb.Embed(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("toolcache: embedding %d tools: %w", len(batch), err)
		}
		if len(vecs) != len(batch) {
			return nil, fmt.Errorf("toolcache: %d vectors for %d tools", len(vecs), len(batch))
		}
		for j, i := range missing {
			s.vecs[i] = vecs[j]
			if store != nil {
				if err := store.Put(ctx, VectorKey(s.model, texts[i]), vecs[j]); err != nil {
					return nil, fmt.Errorf("toolcache: storing tool vectors: %w", err)
				}
			}
		}
	}
	for i, v := range s.vecs {
		if s.dim == 0 {
			s.dim = len(v)
		}
		if len(v) != s.dim || len(v) == 0 {
			return nil, fmt.Errorf("toolcache: tool vector %d has %d dimensions, others %d", i, len(v), s.dim)
		}
		s.vecs[i] = unit(v)
	}
	return s, nil
}

// unit is v scaled to length 1 (a copy; a zero vector stays zero).
func unit(v []float32) []float32 {
	n := 0.0
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	if n == 0 {
		return out
	}
	inv := 1 / math.Sqrt(n)
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}

// ErrNoQueryVector is wrapped by SemanticErr when the embedder answered
// nothing usable for the query.
var ErrNoQueryVector = errors.New("toolcache: no query vector")

// Search ranks like SearchIndex.Search, fused with the tools' similarity
// to the query's vector: each tool's score is 1/(60 + rank) in the BM25F
// ranking plus weight/(60 + rank) in the vector ranking (reciprocal-rank
// fusion; WithVectorWeight), each ranking cut at its first 100. A query that is a tool's name still
// puts it first; opts.Extra tools (no vectors) take part through the BM25F
// ranking. When the query cannot be embedded, the answer is
// SearchIndex.Search's with SemanticErr set.
func (s *SemanticIndex) Search(ctx context.Context, query string, opts SearchOptions) SearchResult {
	qv, err := s.queryVector(ctx, query)
	if err != nil {
		res := s.ix.Search(query, opts)
		res.SemanticErr = err
		return res
	}
	limit := opts.Limit
	if limit <= 0 {
		limit = 10
	}
	lexOpts := opts
	lexOpts.Limit, lexOpts.NoFallback = max(fuseDepth, limit), true
	lex := s.ix.Search(query, lexOpts)
	if lex.UnknownServer && len(opts.Extra) == 0 {
		return lex
	}
	srvWant := int32(-1)
	if opts.Server != "" {
		for i, name := range s.ix.servers {
			if strings.EqualFold(name, opts.Server) {
				srvWant = int32(i)
			}
		}
	}
	// The vector ranking: the fuseDepth most similar tools the options
	// allow.
	vec := topK{limit: fuseDepth}
	if !lex.UnknownServer {
		for i, v := range s.vecs {
			if !opts.Filter.ok(s.ix, int32(i)) || (srvWant >= 0 && s.ix.srvOf[i] != srvWant) {
				continue
			}
			vec.push(&s.ix.tools[i], float64(dot(qv, v)))
		}
	}
	type fused struct {
		t     Tool
		score float64
		first bool // an exact name match: ahead of everything
	}
	byName := map[string]*fused{}
	var order []*fused
	add := func(t Tool, rank int, w float64, first bool) {
		f := byName[t.Name]
		if f == nil {
			f = &fused{t: t}
			byName[t.Name] = f
			order = append(order, f)
		}
		f.score += w / float64(rrfK+rank)
		f.first = f.first || first
	}
	for r, h := range lex.Hits {
		add(h.Tool, r+1, 1, math.IsInf(h.Score, 1))
	}
	w := s.weight
	if w == 0 {
		w = DefaultVectorWeight
	}
	for r, h := range vec.sorted() {
		add(*h.t, r+1, w, false)
	}
	top := topK{limit: limit}
	for _, f := range order {
		sc := f.score
		if f.first {
			sc = math.Inf(1)
		}
		top.push(&f.t, sc)
	}
	res := SearchResult{Weak: lex.Weak, UnknownServer: lex.UnknownServer}
	for _, h := range top.sorted() {
		res.Hits = append(res.Hits, SearchHit{Tool: *h.t, Score: h.score})
	}
	if len(res.Hits) == 0 && !opts.NoFallback && !res.UnknownServer {
		return s.ix.Search(query, opts) // the closest names, marked Fallback
	}
	if len(lex.Hits) == 0 {
		res.Weak = false // no word matched: the ranking is the vectors'
	}
	return res
}

// queryVector embeds the query (its first maxQueryEmbedText bytes) as a
// unit vector.
func (s *SemanticIndex) queryVector(ctx context.Context, query string) ([]float32, error) {
	vs, err := s.emb.Embed(ctx, []string{cut(query, maxQueryEmbedText)})
	switch {
	case err != nil:
		return nil, fmt.Errorf("toolcache: embedding the query with %s: %w", s.model, err)
	case len(vs) != 1 || len(vs[0]) != s.dim:
		return nil, fmt.Errorf("%w: %d vectors from %s, want one of %d dimensions", ErrNoQueryVector, len(vs), s.model, s.dim)
	}
	return unit(vs[0]), nil
}

// cut is s's first n bytes at most, not ending inside a UTF-8 sequence.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

func dot(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
