package toolcache

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// lockedLog keeps every line a text handler wrote.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestURLCredentialsScrubbed: an MCP server's URL carrying its API key in
// the query (https://host/mcp?api_key=..., as hosted servers do) was
// quoted whole by the transports' errors: a call of a server that had
// gone away reached the model, the events and the transcript as
// 'Post "http://127.0.0.1:43257/mcp?api_key=SECRETQ123": dial tcp ...'
// (seen end to end with bin/worker), and so did the status and every log
// line of a server that could not be reached. The key is now taken out of
// every error the pool returns and every line it logs.
func TestURLCredentialsScrubbed(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(server.NewStreamableHTTPServer(newTestMCPServer("up"), server.WithStateful(true)))
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a port nobody serves
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	secrets := map[string][]string{ // server → the key its URL carries, as written and decoded
		"up":   {"SECRETQ123up"},
		"down": {"s3cr3t%2B%2F%3Ddown", "s3cr3t+/=down"},
	}
	var log lockedLog
	s := DefaultSettings()
	s.ConnectTimeout, s.HealthInterval, s.BackoffInitial, s.BackoffMax = 10*time.Second, 0, 50*time.Millisecond, 100*time.Millisecond
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{
		"up":   {URL: ts.URL + "/mcp?api_key=" + secrets["up"][0]},
		"down": {URL: "http://" + down + "/mcp?x=1&access_token=s3cr3t%2B%2F%3Ddown"},
	}}, WithSettings(s), WithLogger(slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	v := newTestView(t, p, nil, nil, nil)
	if got := call(t, v, "echo", map[string]any{"text": "hi"}).Text; got != "hi" {
		t.Fatalf("echo = %q", got)
	}
	ts.CloseClientConnections()
	ts.Close() // the server goes away: the next call fails, quoting the URL

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, callErr := v.CallTool(ctx, "echo", json.RawMessage(`{"text":"again"}`))
	_, listErr := v.ListResources(ctx)
	var status strings.Builder
	for _, st := range p.Status() {
		fmt.Fprintf(&status, "%s %s %s\n", st.Name, st.State, st.Error)
	}
	shown := []struct{ what, text string }{
		{"the call's error", fmt.Sprint(callErr)},
		{"the listing's error", fmt.Sprint(listErr)},
		{"the status", status.String()},
		{"the log", log.String()},
	}
	if callErr == nil || !strings.Contains(callErr.Error(), "xxxxx") {
		t.Errorf("call of a server gone away: %v; want an error with the key masked", callErr)
	}
	if !strings.Contains(status.String(), "down failed") || !strings.Contains(log.String(), "access_token=xxxxx") {
		t.Errorf("status:\n%s\nlog:\n%s", status.String(), log.String())
	}
	for _, sh := range shown {
		for server, keys := range secrets {
			for _, key := range keys {
				if strings.Contains(sh.text, key) {
					t.Errorf("%s holds server %s's key:\n%s", sh.what, server, sh.text)
				}
			}
		}
	}
}
