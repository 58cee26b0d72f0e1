package llm_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
	// maxInputs and maxLen, when set, are the server's limits: a request
	// over them is refused (413 for too many inputs, 422 for a text too
	// long: text-embeddings-inference answers 413 to both, other servers
	// 400); sizes records every request's input count and longest input.
	maxInputs, maxLen int
	mu                sync.Mutex
	sizes             [][2]int
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
	longest := 0
	for _, in := range req.Input {
		longest = max(longest, len(in))
	}
	s.mu.Lock()
	s.sizes = append(s.sizes, [2]int{len(req.Input), longest})
	s.mu.Unlock()
	if s.maxInputs > 0 && len(req.Input) > s.maxInputs {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		fmt.Fprintf(w, `{"error":{"message":"batch size %d > maximum allowed batch size %d","type":"validation"}}`, len(req.Input), s.maxInputs)
		return
	}
	if s.maxLen > 0 && longest > s.maxLen {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprintf(w, `{"error":{"message":"inputs must have less than %d bytes","type":"validation"}}`, s.maxLen)
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

// TestEmbedFitsTheServersLimits: OpenAI-compatible servers take far fewer
// inputs a request, and shorter texts, than OpenAI (text-embeddings-
// inference: 32 inputs, 512 tokens, each refused with 413). Every
// request of 128 tool texts was refused, so the hybrid ranking never came
// up. A refused batch is now split, a refused text cut, and what went
// through bounds the later requests.
func TestEmbedFitsTheServersLimits(t *testing.T) {
	t.Parallel()
	texts := func(n, long int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("text %03d ", i) // distinct lengths are not needed: the order is checked by index
			if i%7 == 3 {
				out[i] += strings.Repeat("é", long/2)
			}
		}
		return out
	}
	tests := []struct {
		name              string
		maxInputs, maxLen int
		n, long           int
		err               string // "": every text embedded
	}{
		{"32 inputs", 32, 0, 200, 0, ""},
		{"texts of 1,000 bytes", 0, 1000, 200, 3000, ""},
		{"both", 20, 700, 300, 4000, ""},
		{"one input at a time", 1, 0, 5, 0, ""},
		{"a limit below the shortest cut", 0, 100, 10, 3000, "(refused too when cut to 39"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newEmbedServer(t)
			s.maxInputs, s.maxLen = tc.maxInputs, tc.maxLen
			e := s.embedder(t)
			in := texts(tc.n, tc.long)
			vecs, err := e.Embed(testCtx(t), in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, llm.ErrNonRetryable) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(vecs) != len(in) {
				t.Fatalf("%d vectors for %d texts", len(vecs), len(in))
			}
			for i, v := range vecs {
				// v[0] is the length of the text the server got: the text
				// itself, or its head within the limit.
				got, want := int(v[0]), len(in[i])
				if tc.maxLen > 0 && want > tc.maxLen {
					if got > tc.maxLen || got < tc.maxLen/2-1 || !strings.HasPrefix(in[i], in[i][:got]) {
						t.Fatalf("text %d (%d bytes) sent as %d bytes, limit %d", i, want, got, tc.maxLen)
					}
				} else if got != want {
					t.Fatalf("vector %d is of a text of %d bytes, want %d", i, got, want)
				}
			}
			// Once found, the limits bound the next call's requests: none
			// is refused.
			s.mu.Lock()
			first := len(s.sizes)
			s.mu.Unlock()
			if _, err := e.Embed(testCtx(t), in); err != nil {
				t.Fatal(err)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, sz := range s.sizes[first:] {
				if (tc.maxInputs > 0 && sz[0] > tc.maxInputs) || (tc.maxLen > 0 && sz[1] > tc.maxLen) {
					t.Fatalf("a request of %d inputs, the longest %d bytes, after the limits were found (%d, %d)", sz[0], sz[1], tc.maxInputs, tc.maxLen)
				}
			}
			if n := len(s.sizes) - first; tc.maxInputs > 0 && n > (len(in)+tc.maxInputs-1)/tc.maxInputs*2 {
				t.Errorf("%d requests for %d texts at %d a request", n, len(in), tc.maxInputs)
			}
		})
	}
}

// A refusal that no smaller request passes (the key, the model) is not
// split: one request, as before.
func TestEmbedRefusalNotSplit(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusUnauthorized, http.StatusNotFound} {
		s := newEmbedServer(t, status)
		in := make([]string, 100)
		for i := range in {
			in[i] = strings.Repeat("x", 3000)
		}
		if _, err := s.embedder(t).Embed(testCtx(t), in); err == nil || s.n.Load() != 1 {
			t.Errorf("after a %d: %v, %d requests; want the error after one", status, err, s.n.Load())
		}
	}
}
