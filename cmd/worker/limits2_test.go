package main

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// TestLimitsAtTheirBoundsNamed: a limit set to a value the worker cannot
// use is refused at start, naming the variable and the value.
// JETAGENT_CODE_TIMEOUT, JETAGENT_CODE_MAX_CALLS and JETAGENT_CODE_MAX_OUTPUT
// set to 0 ran with codemode's defaults (30s, 200 calls, 20000 bytes)
// without a word; JETAGENT_DLQ_MAX_AGE=1m stopped the worker with the NATS
// server's "duplicates window can not be larger then max age", and one
// under 100ms with the server's own words, after NATS was reached.
func TestLimitsAtTheirBoundsNamed(t *testing.T) {
	// Not parallel: it sets environment variables.
	for _, tt := range []struct {
		env, value, want string
	}{
		{"JETAGENT_CODE_TIMEOUT", "0", "invalid JETAGENT_CODE_TIMEOUT: must be positive (got 0s; unset, the default is 30s)"},
		{"JETAGENT_CODE_MAX_CALLS", "0", "invalid JETAGENT_CODE_MAX_CALLS: must be positive (got 0; unset, the default is 200)"},
		{"JETAGENT_CODE_MAX_CALLS", "-1", "invalid JETAGENT_CODE_MAX_CALLS: must be positive (got -1; unset, the default is 200)"},
		{"JETAGENT_CODE_MAX_OUTPUT", "0", "invalid JETAGENT_CODE_MAX_OUTPUT: must be positive (got 0; unset, the default is 20000)"},
		{"JETAGENT_CODE_MAX_MEMORY", "1000", "invalid JETAGENT_CODE_MAX_MEMORY: must be 16 MiB to 64 GiB in bytes (got 1000; unset, the default is 268435456)"},
		{"JETAGENT_CODE_SANDBOX", "docker", `invalid JETAGENT_CODE_SANDBOX: "docker" is not process or in-process`},
		{"JETAGENT_DLQ_MAX_AGE", "10ms", "invalid JETAGENT_DLQ_MAX_AGE: must be 0 (kept until purged) or at least 100ms (got 10ms)"},
		{"JETAGENT_EVENTS_MAX_AGE", "1ns", "invalid JETAGENT_EVENTS_MAX_AGE: must be at least 100ms (got 1ns)"},
		{"JETAGENT_DUPLICATE_WINDOW", "99ms", "invalid JETAGENT_DUPLICATE_WINDOW: must be at least 100ms (got 99ms)"},
		// An explicit 0 ran with the 1 MiB default; sub-second MCP
		// intervals failed every ping (the ping's timeout is the interval)
		// or re-read tools/list in a loop.
		{"JETAGENT_MAX_JOB_BYTES", "0", "invalid JETAGENT_MAX_JOB_BYTES: must be positive (got 0; unset, the default is 1048576"},
		{"JETAGENT_MCP_HEALTH_INTERVAL", "1ns", "invalid JETAGENT_MCP_HEALTH_INTERVAL: must be 0 (off) or at least 1s (got 1ns)"},
		{"JETAGENT_MCP_HEALTH_INTERVAL", "500ms", "invalid JETAGENT_MCP_HEALTH_INTERVAL: must be 0 (off) or at least 1s (got 500ms)"},
		{"JETAGENT_MCP_RESYNC_INTERVAL", "1ms", "invalid JETAGENT_MCP_RESYNC_INTERVAL: must be 0 (off) or at least 1s (got 1ms)"},
		{"JETAGENT_QUEUES", "ok,,ok", "invalid JETAGENT_QUEUES: an empty name (two commas in a row, or one at an end?) must match"},
		{"JETAGENT_QUEUES", "a b", `invalid JETAGENT_QUEUES: "a b" must match`},
		// Accepted before, and logged as queues="[a b a]";
		// JETAGENT_REPLICAS=3 with the embedded server
		// stopped at the first stream with the server's words.
		{"JETAGENT_QUEUES", "a, b,a", `invalid JETAGENT_QUEUES: "a" is named twice`},
		{"JETAGENT_REPLICAS", "3", "invalid JETAGENT_REPLICAS=3: the embedded NATS server (NATS_URL unset) is a single node"},
		{"JETAGENT_MAX_STORE", "1000000", "invalid JETAGENT_MAX_STORE: 1000000 bytes: want 0 (75% of the disk space free at start) or at least 67108864 (64 MiB)"},
		{"JETAGENT_MAX_STORE", "-1", "invalid JETAGENT_MAX_STORE: -1 bytes"},
	} {
		t.Run(tt.env+"="+tt.value, func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", "sk-test")
			t.Setenv("JETAGENT_DATA_DIR", filepath.Join(t.TempDir(), "nats"))
			t.Setenv(tt.env, tt.value)
			var stderr bytes.Buffer
			if code := run(nil, io.Discard, &stderr); code != 1 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("got %q, want %q", stderr.String(), tt.want)
			}
		})
	}
}
