package toolcache

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
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
	"golang.org/x/sys/unix"
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
// replaces it with a new server that knows none of the old sessions. w (may
// be nil) watches the server.
func httpTestServer(t *testing.T, w *serverWatch) (url string, restart func()) {
	t.Helper()
	sw := &swapHandler{}
	mk := func() http.Handler {
		return server.NewStreamableHTTPServer(watchedTestMCPServer("http", w), server.WithStateful(true))
	}
	sw.set(mk())
	ts := httptest.NewServer(w.wrap(sw))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts.URL + "/mcp", func() { sw.set(mk()) }
}

// sessionlessTestServer serves the test MCP server the way a gateway that
// accepts only protocol 2026-07-28 does: mcp-go's server answers both eras on
// one endpoint (and has no option to refuse the handshake), so a guard in
// front refuses every request that does not carry 2026-07-28 in its
// Mcp-Protocol-Version header: the initialize handshake, its GET stream and
// DELETE. refused counts what it turned away. w (may be nil) watches the
// server.
func sessionlessTestServer(t *testing.T, w *serverWatch) (url string, refused *atomic.Int64) {
	t.Helper()
	refused = &atomic.Int64{}
	h := server.NewStreamableHTTPServer(watchedTestMCPServer("sessionless", w),
		server.WithStreamableHTTPProtocolVersions(mcp.ProtocolVersion20260728))
	guard := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get(mcp.HeaderProtocolVersion); r.Method != http.MethodPost || v != mcp.ProtocolVersion20260728 {
			refused.Add(1)
			http.Error(rw, "this endpoint speaks only MCP "+mcp.ProtocolVersion20260728, http.StatusBadRequest)
			return
		}
		h.ServeHTTP(rw, r)
	})
	ts := httptest.NewServer(w.wrap(guard))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts.URL + "/mcp", refused
}

// healthEvents is a pool's health-check outcomes as they happen.
type healthEvents chan healthEvent

func newHealthEvents() healthEvents { return make(chan healthEvent, 1000) }

func (h healthEvents) option() Option {
	return func(o *options) {
		o.healthHook = func(_ string, ev healthEvent) {
			select {
			case h <- ev:
			default:
			}
		}
	}
}

// waitUntil reads health events until ok returns true for one, failing the
// test after 20 s.
func (h healthEvents) waitUntil(t *testing.T, what string, ok func(healthEvent) bool) healthEvent {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev := <-h:
			if ok(ev) {
				return ev
			}
		case <-timeout:
			t.Fatalf("no health check %s within 20s", what)
			return healthEvent{}
		}
	}
}

// sseTestServer serves a test MCP server over the SSE transport. w (may be
// nil) watches the server.
func sseTestServer(t *testing.T, w *serverWatch) string {
	t.Helper()
	return serveSSE(t, watchedTestMCPServer("sse", w), w.wrap)
}

// serveSSE serves s over the legacy SSE transport until the test ends,
// through wrap (may be nil), and returns its /sse URL.
func serveSSE(t *testing.T, s *server.MCPServer, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	sse := server.NewSSEServer(s)
	var h http.Handler = sse
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewServer(h)
	server.WithBaseURL(ts.URL)(sse)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts.URL + "/sse"
}

// serverWatch is what a test sees, from inside its own process, of the test
// server's slow calls and of the cancellations sent to it.
//
// Over streamable HTTP a notification cannot tell the test that a handler's
// context ended: mcp-go's stateful server hands a session's notifications to
// whichever of its streams reads first, so test/cancelled, sent as the
// cancelled call ends, can be written to that call's abandoned POST response,
// or taken and dropped by the forwarder of a POST that has just finished; and
// the client's listening GET stream may not be connected yet. So servers in
// the test process report on Go channels, and the stdio server's
// notifications (one ordered pipe, nothing lost) are fed into the same ones.
type serverWatch struct {
	started   chan string // slow(id): the handler began
	cancelled chan string // slow(id): the handler's context ended
	// cancels receives the requestId (raw JSON) of each notifications/cancelled
	// POSTed to a wrapped HTTP endpoint.
	cancels chan string

	mu    sync.Mutex
	calls map[string]string // slow's id argument -> raw JSON id of its tools/call
}

func newServerWatch() *serverWatch {
	return &serverWatch{
		started:   make(chan string, 100),
		cancelled: make(chan string, 100),
		cancels:   make(chan string, 100),
		calls:     map[string]string{},
	}
}

// report records a slow call's event ("started" or "cancelled"); never blocks.
func (w *serverWatch) report(event, id string) {
	if w == nil {
		return
	}
	ch := w.started
	if event == "cancelled" {
		ch = w.cancelled
	}
	select {
	case ch <- id:
	default:
	}
}

// option feeds the stdio server's test/started and test/cancelled
// notifications into w.
func (w *serverWatch) option() Option {
	return WithNotificationHandler(func(_ string, n mcp.JSONRPCNotification) {
		if id, ok := n.Params.AdditionalFields["id"].(string); ok {
			switch n.Method {
			case "test/started":
				w.report("started", id)
			case "test/cancelled":
				w.report("cancelled", id)
			}
		}
	})
}

// wrap returns h observing the JSON-RPC messages POSTed to it: which request
// id each slow call has, and every notifications/cancelled.
func (w *serverWatch) wrap(h http.Handler) http.Handler {
	if w == nil {
		return h
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Body != nil {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(rw, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Params struct {
					Name      string              `json:"name"`
					Arguments struct{ ID string } `json:"arguments"`
					RequestID json.RawMessage     `json:"requestId"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil {
				switch {
				case msg.Method == string(mcp.MethodToolsCall) && msg.Params.Name == "slow":
					w.mu.Lock()
					w.calls[msg.Params.Arguments.ID] = string(msg.ID)
					w.mu.Unlock()
				case msg.Method == string(mcp.MethodNotificationCancelled):
					select {
					case w.cancels <- string(msg.Params.RequestID):
					default:
					}
				}
			}
		}
		h.ServeHTTP(rw, r)
	})
}

// waitFor waits until ch yields want; what names it in the failure.
func waitFor(t *testing.T, ch <-chan string, want, what string) {
	t.Helper()
	// A bound against a hang: 10 s was once not enough for a stdio test
	// server's handler to start under a full -race run on a loaded machine.
	timeout := time.After(30 * time.Second)
	for {
		select {
		case got := <-ch:
			if got == want {
				return
			}
		case <-timeout:
			t.Fatalf("%s not seen within 30s", what)
		}
	}
}

// waitStarted waits until slow(id)'s handler is running.
func (w *serverWatch) waitStarted(t *testing.T, id string) {
	t.Helper()
	waitFor(t, w.started, id, "start of slow call "+strconv.Quote(id))
}

// waitCancelled waits until slow(id)'s handler has seen its context end.
func (w *serverWatch) waitCancelled(t *testing.T, id string) {
	t.Helper()
	waitFor(t, w.cancelled, id, "handler cancellation of slow call "+strconv.Quote(id))
}

// waitCancelNote waits until the server has been sent notifications/cancelled
// naming slow(id)'s tools/call request.
func (w *serverWatch) waitCancelNote(t *testing.T, id string) {
	t.Helper()
	w.mu.Lock()
	reqID, ok := w.calls[id]
	w.mu.Unlock()
	if !ok {
		t.Fatalf("slow call %q never reached the HTTP endpoint", id)
	}
	waitFor(t, w.cancels, reqID, "notifications/cancelled for request "+reqID+" (slow call "+strconv.Quote(id)+")")
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
	// Health and resync tests use intervals of milliseconds.
	p, err := NewPool(ctx, cfg, append([]Option{withShortIntervals()}, opts...)...)
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

// withShortIntervals lets a test pool take health and resync intervals
// under MinInterval.
func withShortIntervals() Option { return func(o *options) { o.shortIntervals = true } }

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

// stopChild stops pid, a child process of this test binary, with SIGSTOP and
// returns once the stop has taken effect; false if the child had exited (or
// been reaped) first.
//
// kill(2) returning does not mean the process has stopped: the signal wakes
// one of its threads, and the group stop begins only when that thread runs.
// On a loaded machine its other threads can meanwhile read another request
// and answer it. waitid(WSTOPPED) reports the child once every thread has
// stopped; WEXITED ends the wait for a child that died instead, and WNOWAIT
// leaves both reports to os/exec's own wait.
func stopChild(t *testing.T, pid int) bool {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return false
		}
		t.Fatal(err)
	}
	const cldStopped = 5 // CLD_STOPPED in <signal.h>
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WEXITED|unix.WNOWAIT, nil)
		switch {
		case err == nil:
			return info.Code == cldStopped
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.ECHILD):
			return false
		default:
			t.Fatalf("waitid %d: %v", pid, err)
		}
	}
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

// callUntil calls name on v, a tool that changes what servers list, and
// waits until the pool's registry has read the change (done says so;
// what names it, for the failure).
func callUntil(t *testing.T, p *Pool, v *View, name string, args any, what string, done func(*Registry) bool) {
	t.Helper()
	changed := make(chan struct{}, 10)
	p.Registry().OnChange(func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	call(t, v, name, args)
	deadline := time.After(30 * time.Second)
	for !done(p.Registry()) {
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("not %s after 30 s: %v", what, p.Registry().Names())
		}
	}
}
