package agentloop_test

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// weatherVector is a toy embedding: words of one concept share a
// dimension, so "umbrella" is near the weather tool, which no word of it
// names.
func weatherVector(text string) []float32 {
	concepts := map[string]string{"weather": "sky", "forecast": "sky", "umbrella": "sky", "drizzle": "sky", "sunny": "sky"}
	v := make([]float32, 16)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return r < 'a' || r > 'z' }) {
		if c, ok := concepts[w]; ok {
			w = c
		}
		h := fnv.New32a()
		h.Write([]byte(w))
		v[h.Sum32()%16]++
	}
	return v
}

// scriptedEmbeddings is an OpenAI-compatible /v1/embeddings server; down
// makes it fail.
func scriptedEmbeddings(t *testing.T, down *atomic.Bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
			Model string   `json:"model"`
		}
		if down.Load() || r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, `{"error":{"message":"no embeddings today"}}`, http.StatusBadRequest)
			return
		}
		data := []map[string]any{}
		for i, in := range req.Input {
			data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": weatherVector(in)})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// search_tools in a job ranks with the pool's hybrid index once its tool
// vectors are ready: a request whose words match no tool finds the one
// its vector is nearest. When the query cannot be embedded, it answers
// with BM25F and the job gets search.semantic_fallback.
func TestSearchToolsSemantic(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	emb := scriptedEmbeddings(t, &down)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var ts testServer
	p, err := toolcache.NewPool(ctx, toolcache.Config{},
		toolcache.WithInProcessServer("test", newTestMCPServer(&ts, false), toolcache.ServerConfig{}),
		toolcache.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("pool close: %v", err)
		}
	})
	view, err := p.View(t.Name(), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = view.Close() })
	if res := view.SearchTools("umbrella drizzle", toolcache.SearchOptions{}); !res.Fallback {
		t.Fatalf("the query matches words of tools: %+v", res.Hits)
	}
	e, err := llm.NewEmbedder(llm.Config{BaseURL: emb.URL + "/v1", MaxRetries: -1}, "weather-embed")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.EnableSemantic(toolcache.SemanticConfig{Embedder: e, Store: &toolcache.MemoryVectorStore{}}); err != nil {
		t.Fatal(err)
	}
	for p.Registry().Semantic() == nil {
		if ctx.Err() != nil {
			t.Fatal("no hybrid index")
		}
		time.Sleep(5 * time.Millisecond)
	}

	search := func(t *testing.T, args string) (string, *events) {
		t.Helper()
		s := llmtest.NewServer(t, toolReply(call("search_tools", args)), textReply("done"))
		var evs events
		res, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{
			Task: "x", Mode: agentloop.ModeSearch, Tools: view, Sink: &evs,
		})
		if err != nil {
			t.Fatal(err)
		}
		return toolMessages(res.Messages)[0].Content, &evs
	}

	out, evs := search(t, `{"query":"umbrella drizzle","limit":2}`)
	if !strings.HasPrefix(out, `[{"name":"get_weather"`) {
		t.Errorf("hybrid: %s; want get_weather first and no note", out)
	}
	if fb := evs.of(agentloop.EventSearchSemanticFallback); len(fb) != 0 {
		t.Errorf("fallback events with the endpoint up: %+v", fb)
	}

	down.Store(true)
	out, evs = search(t, `{"query":"weather forecast for a city","limit":2}`)
	if !strings.HasPrefix(out, `[{"name":"get_weather"`) {
		t.Errorf("endpoint down: %s; want BM25F's answer", out)
	}
	fb := evs.of(agentloop.EventSearchSemanticFallback)
	if len(fb) != 1 || fb[0].Round != 1 || !strings.Contains(fb[0].Data["error"].(string), "no embeddings today") {
		t.Errorf("fallback events: %+v; want one in round 1 with the endpoint's error", fb)
	}
}
