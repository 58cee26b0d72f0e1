package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/toolcache"
)

// JETAGENT_EMBEDDING_MODEL is in the help and checked before anything
// starts.
func TestEmbeddingModelConfig(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"--help"}, &out, io.Discard); code != 0 || !strings.Contains(out.String(), "JETAGENT_EMBEDDING_MODEL") {
		t.Errorf("help (exit %d) lacks JETAGENT_EMBEDDING_MODEL", code)
	}
	t.Setenv("OPENAI_API_KEY", "sk-test")
	dataDir := filepath.Join(t.TempDir(), "nats")
	t.Setenv("JETAGENT_DATA_DIR", dataDir)
	t.Setenv("JETAGENT_EMBEDDING_MODEL", " text-embedding-3-small")
	var stderr bytes.Buffer
	if code := run(nil, io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "invalid JETAGENT_EMBEDDING_MODEL") {
		t.Errorf("exit %d, %q; want JETAGENT_EMBEDDING_MODEL refused", code, stderr.String())
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the embedded NATS started (%s exists: %v)", dataDir, err)
	}
	for _, w := range []string{"0", "-0.5", "101", "NaN", "heavy"} {
		t.Setenv("JETAGENT_EMBEDDING_MODEL", "text-embedding-3-small")
		t.Setenv("JETAGENT_EMBEDDING_WEIGHT", w)
		stderr.Reset()
		if code := run(nil, io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "JETAGENT_EMBEDDING_WEIGHT") {
			t.Errorf("JETAGENT_EMBEDDING_WEIGHT=%s: exit %d, %q; want it refused", w, code, stderr.String())
		}
	}
	if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the embedded NATS started (%s exists: %v)", dataDir, err)
	}
	if got := vectorsBucket(""); got != "AGENT_VECTORS" {
		t.Errorf("bucket %s, want AGENT_VECTORS", got)
	}
	if got := vectorsBucket("my-app"); got != "MY_APP_VECTORS" {
		t.Errorf("bucket %s, want MY_APP_VECTORS", got)
	}
}

// With JETAGENT_EMBEDDING_MODEL set the worker creates <PREFIX>_VECTORS
// and the vectors of its MCP servers' tools land there, one per text,
// keyed by the hash of model and text, from the endpoint's /embeddings.
func TestSemanticVectorsInBucket(t *testing.T) {
	bin, err := buildMCPServer()
	if err != nil {
		t.Fatal(err)
	}
	const model = "embed-test"
	var mu sync.Mutex
	served := map[string][]float32{} // text -> vector
	emb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
			Model string   `json:"model"`
		}
		if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil || req.Model != model {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		data := []map[string]any{}
		mu.Lock()
		for i, in := range req.Input {
			v := []float32{float32(len(in)), float32(i + 1), 0.5}
			served[in] = v
			data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": v})
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": model})
	}))
	t.Cleanup(emb.Close)

	dir := t.TempDir()
	mcpCfg := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(mcpCfg, []byte(`{"mcpServers": {"demo": {"command": "`+bin+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", emb.URL+"/v1") // no chat request is made
	t.Setenv("JETAGENT_DATA_DIR", filepath.Join(dir, "nats"))
	t.Setenv("JETAGENT_LISTEN", "127.0.0.1:0")
	t.Setenv("JETAGENT_MCP_CONFIG", mcpCfg)
	t.Setenv("JETAGENT_EMBEDDING_MODEL", model)
	s, err := loadSettings()
	if err != nil {
		t.Fatal(err)
	}
	_, nc := startServe(t, s)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	kv, err := js.KeyValue(ctx, "AGENT_VECTORS")
	if err != nil {
		t.Fatalf("no AGENT_VECTORS bucket: %v", err)
	}
	if st, err := kv.Status(ctx); err != nil || st.History() != 1 {
		t.Errorf("bucket status %v, %v; want history 1", st, err)
	}
	// Each vector is stored after its text was served: the bucket's
	// updates are the events to check on, the last one completes it.
	watch, err := kv.WatchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Stop() //nolint:errcheck // best effort at the end of the test
	keys := map[string]bool{}
	for {
		mu.Lock()
		n := len(served)
		mu.Unlock()
		if n > 0 && len(keys) == n {
			break
		}
		select {
		case e := <-watch.Updates():
			if e != nil { // nil marks the end of the keys stored before the watch
				keys[e.Key()] = true
			}
		case <-ctx.Done():
			t.Fatalf("%d vectors in the bucket, %d texts embedded", len(keys), n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for text, want := range served {
		e, err := kv.Get(ctx, toolcache.VectorKey(model, text))
		if err != nil {
			t.Errorf("vector of %q: %v", text, err)
			continue
		}
		if got, err := toolcache.DecodeVector(e.Value()); err != nil || !slices.Equal(got, want) {
			t.Errorf("vector of %q: %v, %v; want %v", text, got, err, want)
		}
	}
}
