package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadyzWhileMCPServersConnect: at start the worker waits for each
// MCP server's first connection attempt, up to JETAGENT_MCP_CONNECT_TIMEOUT
// (30 s by default; an npx server may be downloaded first). /readyz said
// "worker starting: connected to NATS; starting" meanwhile, not what it
// waited for; it now names the MCP servers and the bound. Not parallel:
// the worker reads the process's environment.
func TestReadyzWhileMCPServersConnect(t *testing.T) {
	dir := t.TempDir()
	mcpCfg := filepath.Join(dir, "mcp.json")
	// A server that never answers the handshake.
	if err := os.WriteFile(mcpCfg, []byte(`{"mcpServers": {"mute": {"command": "sleep", "args": ["600"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"OPENAI_API_KEY": "", "OPENAI_BASE_URL": "http://127.0.0.1:1/v1", "NATS_URL": "",
		"JETAGENT_DATA_DIR": filepath.Join(dir, "nats"), "JETAGENT_LISTEN": "127.0.0.1:0",
		"JETAGENT_MCP_CONFIG": mcpCfg, "JETAGENT_METRICS_ADDR": "127.0.0.1:0",
		"JETAGENT_MCP_CONNECT_TIMEOUT": "10m",
	} {
		t.Setenv(k, v)
	}
	s, err := loadSettings()
	if err != nil {
		t.Fatal(err)
	}
	addrs := make(chan string, 1)
	s.onMetrics = func(a string) { addrs <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, s, slog.New(slog.NewTextHandler(io.Discard, nil)), nil) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}()
	var base string
	select {
	case a := <-addrs:
		base = "http://" + a
	case err := <-done:
		done <- err
		t.Fatalf("worker stopped: %v", err)
	}
	var body string
	waitFor(t, "/readyz to name the MCP servers it waits for", func() bool {
		var code int
		code, body = get(t, base+"/readyz")
		return code == 503 && strings.Contains(body, "connecting to the MCP servers")
	})
	if !strings.Contains(body, "JETAGENT_MCP_CONNECT_TIMEOUT=10m0s") {
		t.Errorf("/readyz %q does not give the bound", body)
	}
}
