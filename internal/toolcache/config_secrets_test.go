package toolcache

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestConfigCredentialsScrubbed: credentials a server's config hands it
// outside its URL (an Authorization header, a token in env or args) were
// shown whole when the server quoted them back: a stdio server's stderr
// ("invalid token ghp_...") is part of its error, and so is an HTTP
// server's answer to a refused request; both reach the status, the log,
// the model and the events. They are taken out as URL credentials are.
func TestConfigCredentialsScrubbed(t *testing.T) {
	t.Parallel()
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad credentials: "+r.Header.Get("Authorization")+" / "+r.Header.Get("X-Api-Key"), http.StatusUnauthorized)
	}))
	t.Cleanup(echo.Close)
	env := map[string]string{
		"GH": "ghp_EnvToken0123456789abcdef", "ARG": "argSecret-0123456789", "HDR": "hdrBearer-9876543210", "APIKEY": "k3y-0123456789-abcd",
		"FLAG": "flagValue-5555-7777",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg, err := ParseConfigWithEnv([]byte(fmt.Sprintf(`{"mcpServers": {
		"stdio": {"command": "sh", "args": ["-c", "echo \"token $GITHUB_TOKEN refused; args: $*\" >&2; exit 3", "sh", "--api-key=${ARG}", "--token", "${FLAG}"],
			"env": {"GITHUB_TOKEN": "${GH}"}},
		"http": {"url": %q, "headers": {"Authorization": "Bearer ${HDR}", "X-Api-Key": "${APIKEY}"}}}}`, echo.URL+"/mcp")), lookup)
	if err != nil {
		t.Fatal(err)
	}
	var log lockedLog
	s := DefaultSettings()
	s.ConnectTimeout, s.HealthInterval, s.BackoffInitial, s.BackoffMax = 10*time.Second, 0, time.Hour, time.Hour
	p := newTestPool(t, cfg, WithSettings(s), WithLogger(slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	var status strings.Builder
	for _, st := range p.Status() {
		fmt.Fprintf(&status, "%s %s %s\n", st.Name, st.State, st.Error)
	}
	if !strings.Contains(status.String(), "stdio failed") || !strings.Contains(status.String(), "http failed") {
		t.Fatalf("status:\n%s", status.String())
	}
	if !strings.Contains(status.String(), "server stderr: token xxxxx refused") {
		t.Errorf("status does not quote the stderr, masked:\n%s", status.String())
	}
	for _, sh := range []struct{ what, text string }{{"the status", status.String()}, {"the log", log.String()}} {
		for name, v := range env {
			if strings.Contains(sh.text, v) {
				t.Errorf("%s shows %s's value:\n%s", sh.what, name, sh.text)
			}
		}
	}
}

// TestConfigSecrets: which values of a server's config are taken for
// credentials, by their name or their look; others stay readable.
func TestConfigSecrets(t *testing.T) {
	t.Parallel()
	sc := ServerConfig{
		Command: "srv --auth-token cmdTok-0123456789",
		Args:    []string{"--port", "8080", "--api-key=argKey-0123456789", "--password", "hunter22hunter", "sk-abc123def456ghi789", "--root=/srv/data/projects", "--db", "postgres://app:dbPassw0rd@db:5432/x"},
		Env:     map[string]string{"GITHUB_TOKEN": "ghTok-123456789", "HOME": "/home/someone", "NODE_ENV": "production", "SHORT_KEY": "abc", "DATA": "eyJhbGciOiJIUzI1NiJ9"},
		Headers: map[string]string{"Authorization": "Bearer hdr-0123456789", "Cookie": "sid=cookieValue123", "Accept": "application/json"},
	}
	got := sc.configSecrets()
	for _, want := range []string{"argKey-0123456789", "hunter22hunter", "sk-abc123def456ghi789", "dbPassw0rd", "ghTok-123456789", "eyJhbGciOiJIUzI1NiJ9",
		"Bearer hdr-0123456789", "hdr-0123456789", "sid=cookieValue123", "cmdTok-0123456789"} {
		if !contains(got, want) {
			t.Errorf("configSecrets lacks %q: %q", want, got)
		}
	}
	for _, not := range []string{"8080", "/srv/data/projects", "/home/someone", "production", "abc", "application/json", "srv"} {
		if contains(got, not) {
			t.Errorf("configSecrets has %q, no credential: %q", not, got)
		}
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
