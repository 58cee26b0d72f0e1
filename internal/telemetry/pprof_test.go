package telemetry_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/telemetry"
)

// TestRegisterPprof: the index, a named profile and the command line are
// served under /debug/pprof/, and nothing else is added to the mux.
func TestRegisterPprof(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	telemetry.RegisterPprof(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for path, want := range map[string]string{
		"/debug/pprof/":                  "heap",
		"/debug/pprof/heap?debug=1":      "heap profile",
		"/debug/pprof/goroutine?debug=1": "goroutine profile",
		"/debug/pprof/cmdline":           "telemetry.test",
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("%s: %d, body lacks %q", path, resp.StatusCode, want)
		}
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/metrics: %d, want 404 (RegisterPprof adds only /debug/pprof/)", resp.StatusCode)
	}
}
