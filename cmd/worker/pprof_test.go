package main

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// TestPprofSetting: JETAGENT_PPROF is in the help, and is refused without
// the metrics listener it is served on.
func TestPprofSetting(t *testing.T) {
	// Not parallel: it sets environment variables.
	var out bytes.Buffer
	if code := run([]string{"--help"}, &out, io.Discard); code != 0 || !strings.Contains(out.String(), "JETAGENT_PPROF") {
		t.Errorf("help (exit %d) lacks JETAGENT_PPROF", code)
	}
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("JETAGENT_DATA_DIR", filepath.Join(t.TempDir(), "nats"))
	t.Setenv("JETAGENT_PPROF", "true")
	var stderr bytes.Buffer
	if code := run(nil, io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "invalid JETAGENT_PPROF: true needs JETAGENT_METRICS_ADDR") {
		t.Errorf("exit %d: %q", code, stderr.String())
	}
}
