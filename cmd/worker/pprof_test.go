package main

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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

// With JETAGENT_PPROF the metrics listener serves the profiles; without
// it, it does not.
func TestPprofServed(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		var addr string
		s := defaultSettings()
		s.MetricsAddr, s.Pprof = "127.0.0.1:0", on
		s.onMetrics = func(a string) { addr = a }
		stop, err := serveMetrics(s, prometheus.NewRegistry(), func() error { return nil }, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.Get("http://" + addr + "/debug/pprof/cmdline")
		if err != nil {
			stop()
			t.Fatal(err)
		}
		_ = res.Body.Close()
		stop()
		if (res.StatusCode == http.StatusOK) != on {
			t.Errorf("pprof %v: GET /debug/pprof/cmdline = %d", on, res.StatusCode)
		}
	}
}
