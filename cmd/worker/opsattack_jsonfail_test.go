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

// TestJSONLogCarriesTheFatalError: with JETAGENT_LOG_FORMAT=json the
// error that stopped the worker (a bad setting, a data directory that is
// a file) was the one plain "worker: ..." line among JSON ones: a log
// pipeline parsing JSON could not read it, and an alert on level ERROR
// missed it. It is now a JSON line at level ERROR; text logs keep the
// plain line. Not parallel: the worker reads the process's environment.
func TestJSONLogCarriesTheFatalError(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string // in the error
	}{
		{"bad setting", map[string]string{"JETAGENT_CONCURRENCY": "0"}, "JETAGENT_CONCURRENCY"},
		{"bad setting, misspelt variable too", map[string]string{"JETAGENT_CONCURRENCY": "0", "JETAGENT_CONCURENCY": "2"}, "did you mean JETAGENT_CONCURRENCY"},
		{"data directory a file", map[string]string{"JETAGENT_DATA_DIR": notADir}, "not a directory"},
	} {
		for _, format := range []string{"json", "JSON", "text"} {
			t.Run(tc.name+"/"+format, func(t *testing.T) {
				t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
				t.Setenv("OPENAI_API_KEY", "")
				t.Setenv("NATS_URL", "")
				t.Setenv("JETAGENT_LISTEN", "127.0.0.1:0")
				t.Setenv("JETAGENT_DATA_DIR", filepath.Join(t.TempDir(), "data"))
				t.Setenv("JETAGENT_LOG_FORMAT", format)
				for k, v := range tc.env {
					t.Setenv(k, v)
				}
				var stderr bytes.Buffer
				if code := run(nil, io.Discard, &stderr); code != 1 {
					t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr.String())
				}
				lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
				last := lines[len(lines)-1]
				if format == "text" {
					if !strings.HasPrefix(last, "worker: ") || !strings.Contains(last, tc.want) {
						t.Errorf("last line %q, want the plain error with %q", last, tc.want)
					}
					return
				}
				for _, l := range lines {
					if !json.Valid([]byte(l)) {
						t.Errorf("a line that is not JSON: %q", l)
					}
				}
				var rec struct{ Level, Msg, Err string }
				if err := json.Unmarshal([]byte(last), &rec); err != nil || rec.Level != "ERROR" || !strings.Contains(rec.Err, tc.want) {
					t.Errorf("last line %q (%v), want level ERROR and an err with %q", last, err, tc.want)
				}
			})
		}
	}
}
