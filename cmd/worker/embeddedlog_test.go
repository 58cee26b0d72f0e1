package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkerLogsEmbeddedServer: the embedded server's own log lines went
// nowhere, so a store JetStream could not use (here its jetstream
// directory a file) kept the worker waiting 10 s and then exiting with
// "did not start listening". It exits at once with the server's reason,
// and the server's error is a line of the worker's log, JSON in JSON mode.
// Not parallel: the worker reads the process's environment.
func TestWorkerLogsEmbeddedServer(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "jetstream"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("NATS_URL", "")
	t.Setenv("JETAGENT_LISTEN", "127.0.0.1:0")
	t.Setenv("JETAGENT_DATA_DIR", dir)
	t.Setenv("JETAGENT_LOG_FORMAT", "json")
	var stderr bytes.Buffer
	if code := run(nil, io.Discard, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr.String())
	}
	const reason = "storage directory is not a directory"
	var fromServer bool
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	for _, l := range lines {
		var rec struct{ Level, Msg, Err string }
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Errorf("a line that is not JSON: %q", l)
		}
		if rec.Level == "ERROR" && strings.HasPrefix(rec.Msg, "embedded NATS: ") && strings.Contains(rec.Msg, reason) {
			fromServer = true
		}
	}
	if !fromServer {
		t.Errorf("no ERROR line from the server with %q:\n%s", reason, stderr.String())
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, reason) {
		t.Errorf("the worker's error %q does not say %q", last, reason)
	}
}
