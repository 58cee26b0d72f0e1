package toolcache

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestURLPathVariableScrubbed: a hosted server reached with its key in the
// URL's path ("https://host/mcp/${API_KEY}/sse") had the key shown in
// every connection error, the status, `worker tools` and the log (seen
// with bin/worker): only userinfo and credential query parameters were
// known as credentials. A ${VAR} after the host is one now; one in the
// scheme or host stays readable.
func TestURLPathVariableScrubbed(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a port nobody serves
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	env := map[string]string{"PATH_KEY": "sk-ak-PATHKEY123", "HOSTPORT": down, "SSE_KEY": "sk-sse-KEY456"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg, err := ParseConfigWithEnv([]byte(`{"mcpServers": {
		"zap": {"url": "http://${HOSTPORT}/mcp/${PATH_KEY}/mcp"},
		"sse": {"url": "http://${HOSTPORT}/s?k=1#${SSE_KEY}", "type": "sse"}}}`), lookup)
	if err != nil {
		t.Fatal(err)
	}
	var log lockedLog
	s := DefaultSettings()
	s.ConnectTimeout, s.HealthInterval, s.BackoffInitial, s.BackoffMax = 10*time.Second, 0, time.Hour, time.Hour
	p := newTestPool(t, cfg, WithSettings(s), WithLogger(slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	v := newTestView(t, p, nil, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, listErr := v.ListResources(ctx)
	var status strings.Builder
	for _, st := range p.Status() {
		fmt.Fprintf(&status, "%s %s %s\n", st.Name, st.State, st.Error)
	}
	for _, sh := range []struct{ what, text string }{
		{"the listing's error", fmt.Sprint(listErr)},
		{"the status", status.String()},
		{"the log", log.String()},
	} {
		for _, key := range []string{env["PATH_KEY"], env["SSE_KEY"]} {
			if strings.Contains(sh.text, key) {
				t.Errorf("%s holds the key %s:\n%s", sh.what, key, sh.text)
			}
		}
		if !strings.Contains(sh.text, down) {
			t.Errorf("%s does not say the address %s (a variable in the host is no secret):\n%s", sh.what, down, sh.text)
		}
	}
}

func TestURLPathValues(t *testing.T) {
	t.Parallel()
	env := map[string]string{"K": "secretkey", "BASE": "https://mcp.example.com", "HOST": "mcp.example.com", "V": "v1"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for raw, want := range map[string][]string{
		"https://h/mcp/${K}/sse":        {"secretkey"},
		"https://h/mcp?x=${K}":          {"secretkey"},
		"${BASE}/mcp/${env:K}":          {"secretkey"},
		"${BASE}/mcp":                   nil,
		"https://${HOST}/mcp":           nil,
		"https://${HOST}:8080/${V}/mcp": nil, // too short to be a key, and masking it would hide the path
		"https://h/${NOPE}":             nil,
	} {
		if got := urlPathValues(raw, lookup); !slices.Equal(got, want) {
			t.Errorf("urlPathValues(%q) = %q, want %q", raw, got, want)
		}
	}
}
