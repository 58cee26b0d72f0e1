package llm_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/jetagent/jetagent/internal/llm"
)

// embedServer is a scripted /v1/embeddings endpoint: each request is
// answered by the next reply (an HTTP status, 0 meaning a good answer);
// a good answer gives text i the vector [len(text), i-th request, 1],
// listed in reverse order to check that Embed orders by index.
type embedServer struct {
	srv     *httptest.Server
	replies []int
	n       atomic.Int32
	model   atomic.Value
	inputs  atomic.Int32
	wrongN  bool
}

func newEmbedServer(t *testing.T, replies ...int) *embedServer {
	t.Helper()
	s := &embedServer{replies: replies}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *embedServer) serve(w http.ResponseWriter, r *http.Request) {
	n := int(s.n.Add(1))
	if r.URL.Path != "/v1/embeddings" || r.Header.Get("Authorization") != "Bearer sk-test" {
		http.Error(w, "wrong path or key: "+r.URL.Path, http.StatusNotFound)
		return
	}
	if n <= len(s.replies) && s.replies[n-1] != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(s.replies[n-1])
		fmt.Fprintf(w, `{"error":{"message":"scripted %d","type":"test"}}`, s.replies[n-1])
		return
	}
	var req struct {
		Input          []string `json:"input"`
		Model          string   `json:"model"`
		EncodingFormat string   `json:"encoding_format"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.EncodingFormat != "float" {
		http.Error(w, fmt.Sprintf("bad request %v %q", err, req.EncodingFormat), http.StatusBadRequest)
		return
	}
	s.model.Store(req.Model)
	s.inputs.Add(int32(len(req.Input)))
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}
	var data []item
	for i := len(req.Input) - 1; i >= 0; i-- {
		if req.Input[i] == "" {
			http.Error(w, "empty input", http.StatusBadRequest)
			return
		}
		data = append(data, item{"embedding", i, []float64{float64(len(req.Input[i])), float64(n), 1}})
	}
	if s.wrongN {
		data = data[1:]
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "model": req.Model, "data": data})
}

func (s *embedServer) embedder(t *testing.T) *llm.Embedder {
	t.Helper()
	e, err := llm.NewEmbedder(llm.Config{
		BaseURL: s.srv.URL + "/v1", APIKey: "sk-test", Model: "chat-model",
		MaxRetryDelay: testMaxRetryDelay, HTTPClient: s.srv.Client(),
	}, "embed-model")
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestEmbed(t *testing.T) {
	t.Parallel()
	s := newEmbedServer(t)
	e := s.embedder(t)
	texts := make([]string, llm.EmbedBatch+3)
	for i := range texts {
		texts[i] = fmt.Sprintf("text %d", i)
	}
	texts[5] = "" // sent as a space
	vecs, err := e.Embed(testCtx(t), texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != len(texts) || s.n.Load() != 2 || int(s.inputs.Load()) != len(texts) {
		t.Fatalf("%d vectors for %d texts in %d requests", len(vecs), len(texts), s.n.Load())
	}
	for i, v := range vecs {
		want := []float32{float32(max(len(texts[i]), 1)), float32(1 + i/llm.EmbedBatch), 1}
		if fmt.Sprint(v) != fmt.Sprint(want) {
			t.Fatalf("vector %d = %v, want %v", i, v, want)
		}
	}
	if got := s.model.Load(); got != "embed-model" || e.Model() != "embed-model" {
		t.Errorf("model sent %v, Model() %q", got, e.Model())
	}
}

// A transient failure is retried; a refusal is not, and says so.
func TestEmbedErrors(t *testing.T) {
	t.Parallel()
	s := newEmbedServer(t, http.StatusServiceUnavailable)
	if _, err := s.embedder(t).Embed(testCtx(t), []string{"a"}); err != nil || s.n.Load() != 2 {
		t.Errorf("after a 503: %v, %d requests", err, s.n.Load())
	}
	s = newEmbedServer(t, http.StatusBadRequest)
	_, err := s.embedder(t).Embed(testCtx(t), []string{"a"})
	if !errors.Is(err, llm.ErrNonRetryable) || s.n.Load() != 1 {
		t.Errorf("after a 400: %v (%d requests), want non-retryable after one", err, s.n.Load())
	}
	s = newEmbedServer(t)
	s.wrongN = true
	if _, err := s.embedder(t).Embed(testCtx(t), []string{"a", "b"}); !errors.Is(err, llm.ErrNonRetryable) {
		t.Errorf("one vector for two texts: %v", err)
	}
	if _, err := llm.NewEmbedder(llm.Config{BaseURL: s.srv.URL}, ""); !errors.Is(err, llm.ErrConfig) {
		t.Errorf("no model: %v", err)
	}
}
