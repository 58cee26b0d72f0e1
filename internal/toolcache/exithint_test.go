package toolcache

import (
	"strings"
	"testing"
	"time"
)

// TestServerExitNamed: a stdio server that exits during the handshake
// failed with "initialize: transport error: transport closed" and its
// stderr, not saying that it exited or how; one the pool ends itself (it
// never answers) is not said to have ended on its own.
func TestServerExitNamed(t *testing.T) {
	t.Parallel()
	s := DefaultSettings()
	s.ConnectTimeout, s.HealthInterval, s.BackoffInitial, s.BackoffMax = 2*time.Second, 0, time.Hour, time.Hour
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{
		"exits":  {Command: "sh", Args: []string{"-c", "echo 'fatal: no database' >&2; exit 3"}},
		"clean":  {Command: "sh", Args: []string{"-c", "exit 0"}},
		"silent": {Command: "sh", Args: []string{"-c", "exec sleep 60"}},
		// What a server prints to stdout that is no JSON-RPC is dropped
		// by mcp-go: its usage (wrong arguments), or a banner.
		"usage":  {Command: "sh", Args: []string{"-c", "echo 'Usage: server --root DIR'; exit 2"}},
		"banner": {Command: "sh", Args: []string{"-c", "echo '{\"jsonrpc\":\"2.0\",\"method\":\"x\"}'; printf 'Starting\\n  server on stdio\\n\\377'; exec sleep 60"}},
	}}, WithSettings(s))
	// A server that exits at once fails the handshake as "transport
	// closed" or, when it is gone before initialize is written, "broken
	// pipe": which one is timing, what is added to either is not.
	want := map[string]string{
		"exits":  "(the server process ended: exit status 3) (server stderr: fatal: no database)",
		"clean":  "(the server process ended: exit status 0)",
		"silent": "(no answer within the connect timeout 2s)",
		"usage":  `(the server process ended: exit status 2) (server stdout, not JSON-RPC: "Usage: server --root DIR")`,
		"banner": "(no answer within the connect timeout 2s) (server stdout, not JSON-RPC, the last of 3: \"\uFFFD\")",
	}
	for _, st := range p.Status() {
		if st.State != StateFailed || !strings.Contains(st.Error, want[st.Name]) {
			t.Errorf("%s: %s %q, want failed with %q", st.Name, st.State, st.Error, want[st.Name])
		}
		if (st.Name == "silent" || st.Name == "exits") && strings.Contains(st.Error, "stdout") {
			t.Errorf("%s: %q: it wrote nothing to stdout", st.Name, st.Error)
		}
		if st.Name == "silent" && strings.Contains(st.Error, "process ended") {
			t.Errorf("%s: %q: the pool ended it, not the server", st.Name, st.Error)
		}
	}
}

// TestStrayStdoutAfterExitNamed: what a server wrote to stdout is quoted
// even when it reaches the client after the process's exit was seen (CI:
// "usage" failed "broken pipe ... exit status 2" without its usage line,
// the handshake's error being built before mcp-go's reader had read it).
// Here a child of the server writes the line a moment after the server
// exited, having closed its stdin so that initialize fails at once.
func TestStrayStdoutAfterExitNamed(t *testing.T) {
	t.Parallel()
	s := DefaultSettings()
	s.ConnectTimeout, s.HealthInterval, s.BackoffInitial, s.BackoffMax = 10*time.Second, 0, time.Hour, time.Hour
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{
		"late": {Command: "sh", Args: []string{"-c", "exec 0<&-; (exec 2>/dev/null; sleep 0.5; echo 'Usage: server --root DIR') & exit 2"}},
	}}, WithSettings(s))
	want := `(the server process ended: exit status 2) (server stdout, not JSON-RPC: "Usage: server --root DIR")`
	for _, st := range p.Status() {
		if st.State != StateFailed || !strings.Contains(st.Error, want) {
			t.Errorf("%s: %s %q, want failed with %q", st.Name, st.State, st.Error, want)
		}
	}
}
