package toolcache

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// stdioTestServer runs this test binary as an mcp-go stdio server.
func stdioTestServer(name string) ServerConfig {
	return ServerConfig{
		Command: os.Args[0],
		Args:    []string{"-test.run=^$"},
		// The race runtime sleeps 1 s at exit by default; servers exit often here.
		Env: map[string]string{testServerEnv: name, "GORACE": "atexit_sleep_ms=0"},
	}
}

// swapHandler lets a test replace a live HTTP server's handler (to expire
// every session at once, as a restarted server does).
type swapHandler struct{ h atomic.Pointer[http.Handler] }

func (s *swapHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	(*s.h.Load()).ServeHTTP(w, r)
}
func (s *swapHandler) set(h http.Handler) { s.h.Store(&h) }

// httpTestServer serves a fresh test MCP server over streamable HTTP; restart
// replaces it with a new server that knows none of the old sessions.
func httpTestServer(t *testing.T) (url string, restart func()) {
	t.Helper()
	sw := &swapHandler{}
	mk := func() http.Handler {
		return server.NewStreamableHTTPServer(newTestMCPServer("http"), server.WithStateful(true))
	}
	sw.set(mk())
	ts := httptest.NewServer(sw)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts.URL + "/mcp", func() { sw.set(mk()) }
}

// sseTestServer serves a test MCP server over the SSE transport.
func sseTestServer(t *testing.T) string {
	t.Helper()
	sse := server.NewSSEServer(newTestMCPServer("sse"))
	ts := httptest.NewServer(sse)
	server.WithBaseURL(ts.URL)(sse)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts.URL + "/sse"
}

// notes collects server notifications by method.
type notes struct {
	mu sync.Mutex
	ch map[string]chan map[string]any
}

func newNotes() *notes { return &notes{ch: map[string]chan map[string]any{}} }

func (n *notes) get(method string) chan map[string]any {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.ch[method]
	if c == nil {
		c = make(chan map[string]any, 100)
		n.ch[method] = c
	}
	return c
}

func (n *notes) option() Option {
	return WithNotificationHandler(func(server string, note mcp.JSONRPCNotification) {
		m := map[string]any{"server": server}
		for k, v := range note.Params.AdditionalFields {
			m[k] = v
		}
		select {
		case n.get(note.Method) <- m:
		default:
		}
	})
}

// wait returns the next notification of method whose id is id.
func (n *notes) wait(t *testing.T, method, id string) map[string]any {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-n.get(method):
			if id == "" || m["id"] == id {
				return m
			}
		case <-timeout:
			t.Fatalf("no %s notification for %q within 10s", method, id)
			return nil
		}
	}
}

func newTestPool(t *testing.T, cfg Config, opts ...Option) *Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := NewPool(ctx, cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("pool close: %v", err)
		}
	})
	return p
}

func newTestView(t *testing.T, p *Pool, servers []string, allow, deny []string) *View {
	t.Helper()
	v, err := p.View(t.Name(), servers, allow, deny)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = v.Close() })
	return v
}

func call(t *testing.T, v *View, name string, args any) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, _ := json.Marshal(args)
	res, err := v.CallTool(ctx, name, b)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("call %s: tool error: %s", name, res.Text)
	}
	return res
}

func callPID(t *testing.T, v *View, name string) int {
	t.Helper()
	pid, err := strconv.Atoi(call(t, v, name, nil).Text)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// pidGone reports whether no process (not even a zombie) has that pid.
func pidGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// moduleRoot finds the directory holding go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}

// npmBin is the path of an npm reference server installed under tools/npm.
// Without it the test is skipped, unless CI is set: there it must run.
func npmBin(t testing.TB, name string) string {
	t.Helper()
	tt, _ := t.(*testing.T)
	var root string
	if tt != nil {
		root = moduleRoot(tt)
	} else {
		root = "../.."
	}
	p := filepath.Join(root, "tools", "npm", "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		msg := "npm reference server " + name + " not installed; run: npm ci --prefix tools/npm"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

func stdioTestServerPath() string { return os.Args[0] }

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
