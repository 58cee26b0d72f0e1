package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestStrayVariables: a JETAGENT_ variable close to a setting is refused
// with the setting it stands for, other JETAGENT_ variables and NATS_ or
// OPENAI_ variables close to one the worker reads are warnings, and the
// variables of the nats CLI and of openai-go are neither.
func TestStrayVariables(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		environ []string
		err     string   // the error names this (empty: no error)
		notes   []string // the warnings, in order
	}{
		{name: "settings only", environ: []string{"JETAGENT_CONCURRENCY=4", "NATS_URL=nats://x", "OPENAI_MODEL=m", "PATH=/bin"}},
		{name: "a swap", environ: []string{"JETAGENT_CONCURENCY=4"}, err: "unknown variable JETAGENT_CONCURENCY: did you mean JETAGENT_CONCURRENCY?"},
		{name: "a plural", environ: []string{"JETAGENT_MAX_DELIVERS=3"}, err: "did you mean JETAGENT_MAX_DELIVER?"},
		{name: "a singular", environ: []string{"JETAGENT_QUEUE=fast"}, err: "did you mean JETAGENT_QUEUES?"},
		{name: "an underscore left out", environ: []string{"JETAGENT_MCPCONFIG=mcp.json"}, err: "did you mean JETAGENT_MCP_CONFIG?"},
		{name: "lower case", environ: []string{"JETAGENT_tool_mode=search"}, err: "did you mean JETAGENT_TOOL_MODE?"},
		// Written all in lower case (a .env file): ignored without a word.
		{name: "all lower case", environ: []string{"jetagent_concurrency=8"}, err: "unknown variable jetagent_concurrency: did you mean JETAGENT_CONCURRENCY?"},
		{name: "lower-case model variable", environ: []string{"openai_model=m"}, notes: []string{"openai_model is set but not read: did you mean OPENAI_MODEL?"}},
		{name: "unknown", environ: []string{"JETAGENT_COLOUR=red"},
			notes: []string{"JETAGENT_COLOUR is set but is no worker setting (worker --help lists them); it is ignored"}},
		{name: "model endpoint typo", environ: []string{"OPENAI_BASEURL=http://127.0.0.1:8080/v1"},
			notes: []string{"OPENAI_BASEURL is set but not read: did you mean OPENAI_BASE_URL?"}},
		{name: "NATS typo", environ: []string{"NATS_USERS=agent"}, notes: []string{"NATS_USERS is set but not read: did you mean NATS_USER?"}},
		// The embedded server's settings beside NATS_URL do nothing.
		{name: "embedded settings with NATS_URL", environ: []string{"NATS_URL=nats://nats:4222", "JETAGENT_LISTEN=0.0.0.0:4222", "JETAGENT_DATA_DIR=/data", "JETAGENT_MAX_STORE=1073741824"},
			notes: []string{
				"JETAGENT_LISTEN is set but so is NATS_URL: it configures the embedded NATS server, which is started only with NATS_URL unset; it is ignored",
				"JETAGENT_DATA_DIR is set but so is NATS_URL: it configures the embedded NATS server, which is started only with NATS_URL unset; it is ignored",
				"JETAGENT_MAX_STORE is set but so is NATS_URL: it configures the embedded NATS server, which is started only with NATS_URL unset; it is ignored",
			}},
		{name: "embedded settings without NATS_URL", environ: []string{"NATS_URL=", "JETAGENT_LISTEN=0.0.0.0:4222", "JETAGENT_DATA_DIR=/data"}},
		{name: "other programs' variables", environ: []string{"NATS_NKEY=/k", "NATS_CONTEXT=prod", "NATS_JWT=j", "NATS_SEED=s",
			"OPENAI_ORG_ID=o", "OPENAI_PROJECT_ID=p", "NATS_SERVER_OPTIONS=x", "OPENAI_LOG=debug"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := defaultSettings()
			notes, err := strayVars(tt.environ, &s)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one naming %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, n := range notes {
				got = append(got, n.msg)
			}
			if strings.Join(got, "\n") != strings.Join(tt.notes, "\n") {
				t.Fatalf("notes %q, want %q", got, tt.notes)
			}
		})
	}
}

// TestStrayVariablesAtStart: the worker refuses to start on a misspelt
// setting, and the error of a bad setting names the variable that was
// probably meant for it.
func TestStrayVariablesAtStart(t *testing.T) {
	// Not parallel: it sets environment variables.
	t.Setenv("JETAGENT_DATA_DIR", t.TempDir())
	unsetenv(t, "OPENAI_API_KEY")
	unsetenv(t, "OPENAI_BASE_URL")

	t.Run("misspelt setting", func(t *testing.T) {
		t.Setenv("OPENAI_API_KEY", "sk-test")
		t.Setenv("JETAGENT_SHUTDOWN_GRACEE", "1m")
		var stderr bytes.Buffer
		if code := run(nil, &bytes.Buffer{}, &stderr); code != 1 ||
			!strings.Contains(stderr.String(), "unknown variable JETAGENT_SHUTDOWN_GRACEE: did you mean JETAGENT_SHUTDOWN_GRACE?") {
			t.Fatalf("exit %d, stderr %q", code, stderr.String())
		}
	})
	t.Run("misspelt base URL", func(t *testing.T) {
		t.Setenv("OPENAI_BASEURL", "http://127.0.0.1:1/v1")
		var stderr bytes.Buffer
		if code := run(nil, &bytes.Buffer{}, &stderr); code != 1 ||
			!strings.Contains(stderr.String(), "invalid OPENAI_API_KEY") ||
			!strings.Contains(stderr.String(), "did you mean OPENAI_BASE_URL?") {
			t.Fatalf("exit %d, stderr %q", code, stderr.String())
		}
	})
}

// unsetenv unsets key for the test (t.Setenv can only set).
func unsetenv(t *testing.T, key string) {
	t.Helper()
	t.Setenv(key, "") // restores the old value after the test
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
}
