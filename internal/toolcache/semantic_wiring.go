package toolcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// SemanticConfig turns on the hybrid ranking of a pool's tool search (see
// Pool.EnableSemantic).
type SemanticConfig struct {
	// Embedder computes tool and query vectors (llm.Embedder). Required.
	Embedder Embedder
	// Store keeps tool vectors by VectorKey, shared by every worker (a
	// NATS KV bucket); nil: each catalog version embeds every tool again.
	Store VectorStore
	// Concurrency bounds the store reads and writes and the embedding
	// requests in flight while a catalog version's vectors are computed
	// (0: 4).
	Concurrency int
	// QueryTimeout bounds embedding one query, retries included, so a
	// slow endpoint delays a search by at most this much before it
	// answers with BM25F (0: 10 s).
	QueryTimeout time.Duration
	// RetryDelay is the first wait before computing a version's vectors
	// again after a failure; it doubles up to 16 times that (0: 1 min;
	// negative: never retried, BM25F until the catalog changes).
	RetryDelay time.Duration
	// Logger receives one warning per catalog version whose vectors could
	// not be computed (nil: the pool's logger).
	Logger *slog.Logger
	// VectorWeight is the vector ranking's weight in the fusion, BM25F's
	// being 1 (0: DefaultVectorWeight; at most MaxVectorWeight).
	VectorWeight float64
}

// Defaults of SemanticConfig.
const (
	DefaultSemanticConcurrency  = 4
	DefaultSemanticQueryTimeout = 10 * time.Second
	DefaultSemanticRetryDelay   = time.Minute
)

// embedBatch is the most tool texts one Embed call carries while a
// version's vectors are computed (llm.EmbedBatch: one request each).
const embedBatch = 128

// EnableSemantic turns on the hybrid ranking (SemanticIndex: BM25F fused
// with vector similarity) for the pool's search. For every catalog
// version, starting with the current one, the tool vectors are computed
// in the background (read from cfg.Store when a worker already has them,
// else embedded and stored) and the version's SemanticIndex is published
// when they are all there (Registry.Semantic). Until then, or when
// computing them failed, searches rank with BM25F alone. A newer version
// stops the build of an older one; Close stops every build and waits for
// it. It can be called once per pool, before Close.
func (p *Pool) EnableSemantic(cfg SemanticConfig) error {
	if cfg.Embedder == nil {
		return errors.New("toolcache: EnableSemantic: no embedder")
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultSemanticConcurrency
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = DefaultSemanticQueryTimeout
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = DefaultSemanticRetryDelay
	}
	if cfg.Logger == nil {
		cfg.Logger = p.opts.logger
	}
	if cfg.VectorWeight == 0 {
		cfg.VectorWeight = DefaultVectorWeight
	}
	if err := CheckVectorWeight(cfg.VectorWeight); err != nil {
		return fmt.Errorf("toolcache: EnableSemantic: %w", err)
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return fmt.Errorf("toolcache: EnableSemantic: %w", ErrClosed)
	}
	b := &semanticBuilder{p: p, cfg: cfg, query: queryEmbedder{cfg.Embedder, cfg.QueryTimeout}}
	r := p.registry
	r.mu.Lock()
	if r.semantic != nil {
		r.mu.Unlock()
		return errors.New("toolcache: EnableSemantic: already enabled")
	}
	r.semantic = b
	r.mu.Unlock()
	b.start(r.current())
	return nil
}

// semanticBuilder computes each catalog version's SemanticIndex, one
// version at a time, on goroutines of the pool (its context and wait
// group).
type semanticBuilder struct {
	p     *Pool
	cfg   SemanticConfig
	query Embedder // cfg.Embedder bounded by QueryTimeout

	mu      sync.Mutex
	version uint64             // of the newest build started
	cancel  context.CancelFunc // of that build
}

// start builds s's SemanticIndex in the background, stopping the build of
// an older version. A version already started, or older than one started,
// is not started again.
func (b *semanticBuilder) start(s *snapshot) {
	if len(s.tools) == 0 {
		return // nothing to rank; a search of no tools needs no vectors
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.version <= b.version {
		return
	}
	b.p.mu.Lock()
	if b.p.closed {
		b.p.mu.Unlock()
		return
	}
	b.p.wg.Add(1) // before Close can Wait: it sets closed under p.mu first
	b.p.mu.Unlock()
	if b.cancel != nil {
		b.cancel()
	}
	ctx, cancel := context.WithCancel(b.p.ctx)
	b.version, b.cancel = s.version, cancel
	go func() {
		defer b.p.wg.Done()
		defer cancel()
		b.build(ctx, s)
	}()
}

// build computes and publishes s's SemanticIndex, retrying with backoff
// after a failure until it succeeds or ctx ends (a newer version, or
// Close). The first failure of a version is logged as a warning.
func (b *semanticBuilder) build(ctx context.Context, s *snapshot) {
	log := b.cfg.Logger.With("catalog_version", s.version, "tools", len(s.tools), "model", b.cfg.Embedder.Model())
	delay := b.cfg.RetryDelay
	for attempt := 1; ; attempt++ {
		start := time.Now()
		sem, stats, err := b.compute(ctx, s.searchIndex())
		if err == nil {
			s.semantic.Store(sem)
			log.Info("tool search: hybrid ranking ready", "attempt", attempt, "duration", time.Since(start).Round(time.Millisecond),
				"stored", stats.stored, "embedded", stats.embedded)
			if stats.putErr != nil {
				log.Warn("tool search: tool vectors not stored; other workers will embed them again",
					"failed", stats.putFailed, "err", stats.putErr)
			}
			return
		}
		if ctx.Err() != nil {
			return // superseded by a newer version, or the pool closed
		}
		retry := "never"
		if delay > 0 {
			retry = delay.String()
		}
		if attempt == 1 {
			log.Warn("tool search: hybrid ranking unavailable for this catalog version; ranking with BM25F", "err", err, "retry_in", retry)
		} else {
			log.Debug("tool search: computing tool vectors failed again", "attempt", attempt, "err", err, "retry_in", retry)
		}
		if delay < 0 {
			return
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, 16*b.cfg.RetryDelay)
	}
}

// buildStats says where a version's vectors came from.
type buildStats struct {
	stored, embedded int // distinct texts read from the store, embedded
	putFailed        int
	putErr           error // the first failed store write
}

// compute is EmbedIndex with the store reads, embedding requests and
// store writes done cfg.Concurrency at a time: the vectors are gathered
// first, then EmbedIndex assembles the index from them alone. A failed
// store write does not fail it (the vectors are still good).
func (b *semanticBuilder) compute(ctx context.Context, ix *SearchIndex) (*SemanticIndex, buildStats, error) {
	var st buildStats
	model := b.cfg.Embedder.Model()
	keyOf := map[string]string{} // distinct texts, by key
	var keys []string
	for i := range ix.tools {
		text := embedText(&ix.tools[i])
		k := VectorKey(model, text)
		if _, dup := keyOf[k]; !dup {
			keyOf[k] = text
			keys = append(keys, k)
		}
	}
	got := &MemoryVectorStore{m: make(map[string][]float32, len(keys))}
	missing := keys
	if b.cfg.Store != nil {
		found := make([][]float32, len(keys))
		err := forEach(ctx, b.cfg.Concurrency, len(keys), func(ctx context.Context, i int) error {
			v, ok, err := b.cfg.Store.Get(ctx, keys[i])
			if err != nil {
				return fmt.Errorf("toolcache: reading tool vectors: %w", err)
			}
			if ok {
				found[i] = v
			}
			return nil
		})
		if err != nil {
			return nil, st, err
		}
		missing = nil
		for i, v := range found {
			if v == nil {
				missing = append(missing, keys[i])
				continue
			}
			got.m[keys[i]] = v
		}
	}
	st.stored = len(got.m)
	st.embedded = len(missing)
	batches := (len(missing) + embedBatch - 1) / embedBatch
	err := forEach(ctx, b.cfg.Concurrency, batches, func(ctx context.Context, n int) error {
		ks := missing[n*embedBatch : min((n+1)*embedBatch, len(missing))]
		texts := make([]string, len(ks))
		for j, k := range ks {
			texts[j] = keyOf[k]
		}
		vecs, err := b.cfg.Embedder.Embed(ctx, texts)
		if err != nil {
			return fmt.Errorf("toolcache: embedding %d tools: %w", len(texts), err)
		}
		if len(vecs) != len(texts) {
			return fmt.Errorf("toolcache: %d vectors for %d tools", len(vecs), len(texts))
		}
		for j, k := range ks {
			if len(vecs[j]) == 0 {
				return fmt.Errorf("toolcache: an empty vector from %s", model)
			}
			_ = got.Put(ctx, k, vecs[j])
		}
		return nil
	})
	if err != nil {
		return nil, st, err
	}
	if b.cfg.Store != nil && len(missing) > 0 {
		var mu sync.Mutex
		_ = forEach(ctx, b.cfg.Concurrency, len(missing), func(ctx context.Context, i int) error {
			v, _, _ := got.Get(ctx, missing[i])
			if err := b.cfg.Store.Put(ctx, missing[i], v); err != nil {
				mu.Lock()
				st.putFailed++
				if st.putErr == nil {
					st.putErr = err
				}
				mu.Unlock()
			}
			return nil
		})
		if ctx.Err() != nil {
			return nil, st, ctx.Err()
		}
	}
	// Every vector is in got: EmbedIndex embeds nothing; it checks the
	// dimensions and normalises. Queries go through b.query.
	sem, err := EmbedIndex(ctx, ix, b.query, got)
	if err != nil {
		return nil, st, err
	}
	if b.cfg.VectorWeight != 0 { // EnableSemantic has checked it
		sem, err = sem.WithVectorWeight(b.cfg.VectorWeight)
	}
	return sem, st, err
}

// forEach runs f(0..n-1), at most limit at a time, and returns the first
// error (the others are then cancelled).
func forEach(ctx context.Context, limit, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	sem := make(chan struct{}, limit)
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := f(ctx, i); err != nil {
				cancel(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return nil
}

// queryEmbedder bounds each Embed call (a search's query) by timeout.
type queryEmbedder struct {
	Embedder
	timeout time.Duration
}

func (q queryEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	ctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	return q.Embedder.Embed(ctx, texts)
}
