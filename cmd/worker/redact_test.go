package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// The start-up log lines name the model endpoint ("worker starting",
// base_url) and each MCP server's state and error ("MCP server") without
// the userinfo of their URLs: a proxy's user:key@ in OPENAI_BASE_URL, a
// password expanded from ${VAR} into a server's url.
func TestStartupLogHidesURLCredentials(t *testing.T) {
	// Not parallel: it sets environment variables.
	model := llmtest.NewServer(t, llmtest.Reply{Content: "ok"})
	dead := httptest.NewServer(http.NotFoundHandler())
	deadAddr := dead.Listener.Addr().String()
	dead.Close() // connections are refused
	dir := t.TempDir()
	mcpCfg := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(mcpCfg, []byte(`{"mcpServers": {"remote": {"url": "http://mcp:${MCP_PASSWORD}@`+deadAddr+`/mcp"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MCP_PASSWORD", "mcp-s3cret")
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", strings.Replace(model.URL(), "http://", "http://proxy:model-s3cret@", 1))
	t.Setenv("JETAGENT_DATA_DIR", filepath.Join(dir, "nats"))
	t.Setenv("JETAGENT_LISTEN", "127.0.0.1:0")
	t.Setenv("JETAGENT_MCP_CONFIG", mcpCfg)
	t.Setenv("JETAGENT_MCP_BACKOFF_INITIAL", "1h") // one attempt: its error stays in the status
	t.Setenv("JETAGENT_MCP_BACKOFF_MAX", "1h")
	s, err := loadSettings()
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, s, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			func(*jobs.Worker, *nats.Conn) { close(ready) })
	}()
	select {
	case <-ready: // "worker starting" is logged before the worker is ready
	case err := <-done:
		t.Fatalf("worker stopped: %v", err)
	case <-time.After(waitTimeout):
		t.Fatal("worker not ready")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("worker: %v", err)
	}
	out := logs.String()
	for _, want := range []string{"worker starting", "msg=\"MCP server\" name=remote state=failed", deadAddr} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("log holds a URL's password:\n%s", out)
	}
}
