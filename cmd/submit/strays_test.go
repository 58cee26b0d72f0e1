package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestStrayVariables: submit refuses a misspelt setting of its own, warns
// of a misspelt NATS_ variable, and leaves the workers' settings and the
// nats CLI's variables alone.
func TestStrayVariables(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		environ []string
		err     string // the error names this (empty: no error)
		warn    string // stderr (empty: nothing)
	}{
		{name: "settings only", environ: []string{"JETAGENT_PREFIX=a", "JETAGENT_MAX_JOB_BYTES=4096", "NATS_URL=nats://x"}},
		{name: "the workers' settings", environ: []string{"JETAGENT_CONCURRENCY=4", "JETAGENT_MCP_CONFIG=mcp.json", "JETAGENT_ANYTHING=1"}},
		{name: "misspelt prefix", environ: []string{"JETAGENT_PREFX=a"}, err: "unknown variable JETAGENT_PREFX: did you mean JETAGENT_PREFIX?"},
		{name: "misspelt size", environ: []string{"JETAGENT_MAX_JOB_BYTE=4096"}, err: "did you mean JETAGENT_MAX_JOB_BYTES?"},
		{name: "misspelt URL", environ: []string{"NATS_URLS=nats://x"}, warn: "submit: warning: NATS_URLS is set but not read: did you mean NATS_URL?\n"},
		{name: "the nats CLI's variables", environ: []string{"NATS_NKEY=/k", "NATS_CONTEXT=prod", "NATS_TIMEOUT=5s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			c := &cli{stderr: &stderr}
			err := c.strayVars(tt.environ)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one naming %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if stderr.String() != tt.warn {
				t.Fatalf("stderr %q, want %q", stderr.String(), tt.warn)
			}
		})
	}

}

// TestStrayVariableExit: a misspelt setting stops submit before it
// connects, with exit status 2.
func TestStrayVariableExit(t *testing.T) {
	// Not parallel: it sets environment variables.
	t.Setenv("NATS_URL", "nats://127.0.0.1:1") // nothing listens: a connection attempt would fail otherwise
	t.Setenv("JETAGENT_PREFX", "team")
	res := submitCmd(t, "", "hello")
	if res.code != 2 || !strings.Contains(res.stderr, "did you mean JETAGENT_PREFIX?") || strings.Contains(res.stderr, "connect") {
		t.Fatalf("%+v", res)
	}
}

// TestBadVariableValue: a value of the wrong kind stops submit before it
// connects, saying what the variable takes in words ("want int" before).
func TestBadVariableValue(t *testing.T) {
	// Not parallel: it sets environment variables.
	t.Setenv("NATS_URL", "nats://127.0.0.1:1") // nothing listens: a connection attempt would fail otherwise
	for _, tc := range []struct{ value, want string }{
		{"1MiB", `invalid JETAGENT_MAX_JOB_BYTES="1MiB": want an integer (bytes)`},
		{"10", "invalid JETAGENT_MAX_JOB_BYTES: must be at least 1024 (got 10)"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			t.Setenv("JETAGENT_MAX_JOB_BYTES", tc.value)
			res := submitCmd(t, "", "hello")
			if res.code != 2 || !strings.Contains(res.stderr, tc.want) || strings.Contains(res.stderr, "connect") {
				t.Fatalf("want exit 2 and %q\n got %+v", tc.want, res)
			}
		})
	}
}
