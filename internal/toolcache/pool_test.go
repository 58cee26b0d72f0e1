package toolcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// transportCase is one way of reaching the mcp-go test server, watched by w.
type transportCase struct {
	name  string
	setup func(t *testing.T, w *serverWatch) (Config, []Option)
	// cancelNote: the pool has to send notifications/cancelled, and w sees it
	// arrive. (Over stdio the handler's context can end no other way; an
	// in-process handler runs on the caller's context itself.)
	cancelNote bool
}

var transportCases = []transportCase{
	{"stdio", func(t *testing.T, w *serverWatch) (Config, []Option) {
		return Config{Servers: map[string]ServerConfig{"srv": stdioTestServer("stdio")}}, []Option{w.option()}
	}, false},
	{"http", func(t *testing.T, w *serverWatch) (Config, []Option) {
		url, _ := httpTestServer(t, w)
		return Config{Servers: map[string]ServerConfig{"srv": {URL: url}}}, nil
	}, true},
	{"sse", func(t *testing.T, w *serverWatch) (Config, []Option) {
		return Config{Servers: map[string]ServerConfig{"srv": {URL: sseTestServer(t, w), Type: "sse"}}}, nil
	}, true},
	{"inprocess", func(t *testing.T, w *serverWatch) (Config, []Option) {
		return Config{}, []Option{WithInProcessServer("srv", watchedTestMCPServer("inprocess", w), ServerConfig{})}
	}, false},
}

func TestTransports(t *testing.T) {
	t.Parallel()
	for _, tc := range transportCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, opts := tc.setup(t, newServerWatch())
			p := newTestPool(t, cfg, opts...)
			st := p.Status()
			if len(st) != 1 || st[0].State != StateReady {
				t.Fatalf("status = %+v, want one ready server", st)
			}
			if st[0].Protocol != "2025-11-25" {
				t.Errorf("protocol = %q, want 2025-11-25", st[0].Protocol)
			}
			reg := p.Registry()
			for _, name := range []string{"echo", "pid", "slow", "barrier", "add_tool"} {
				tool, ok := reg.Get(name)
				if !ok {
					t.Fatalf("registry lacks %s: %v", name, reg.Names())
				}
				if tool.Server != "srv" || tool.Original != name {
					t.Errorf("tool %s: server %q original %q", name, tool.Server, tool.Original)
				}
			}
			v := newTestView(t, p, nil, nil, nil)
			if got := call(t, v, "echo", map[string]any{"text": "hi " + tc.name}).Text; got != "hi "+tc.name {
				t.Errorf("echo = %q", got)
			}

			// Resources and templates are listed and readable.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			rs, err := v.ListResources(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var uris []string
			for _, r := range rs {
				uris = append(uris, r.URI+r.URITemplate)
			}
			if strings.Join(uris, ",") != "test://hello,test://item/{id}" {
				t.Errorf("resources = %v", uris)
			}
			for in, want := range map[string]string{"test://hello": "hello world", "hello": "hello world", "test://item/7": "item test://item/7"} {
				got, err := v.ReadResource(ctx, in)
				if err != nil || got != want {
					t.Errorf("ReadResource(%q) = %q, %v; want %q", in, got, err, want)
				}
			}

			// notifications/tools/list_changed updates the registry. The
			// wait is a bound against a hang: the pool holds a re-read back
			// for listChangedGap after connecting, and one second left a
			// loaded machine about 500 ms.
			changed := make(chan struct{}, 10)
			reg.OnChange(func() { changed <- struct{}{} })
			start := time.Now()
			call(t, v, "add_tool", map[string]any{"name": "late_tool"})
			deadline := time.After(30 * time.Second)
			for !reg.Has("late_tool") {
				select {
				case <-changed:
				case <-deadline:
					t.Fatalf("late_tool not in the registry 30 s after list_changed: %v", reg.Names())
				}
			}
			t.Logf("%s: registry updated %v after add_tool", tc.name, time.Since(start))
			if got := call(t, v, "late_tool", nil).Text; got != "late_tool" {
				t.Errorf("late_tool = %q", got)
			}
		})
	}
}

// A server killed mid-call: that call gets ErrSessionLost naming the server,
// the next call succeeds on a fresh process.
func TestKilledMidCall(t *testing.T) {
	t.Parallel()
	n := newNotes()
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"victim": stdioTestServer("victim")}}, n.option())
	v := newTestView(t, p, nil, nil, nil)
	pid1 := callPID(t, v, "pid")

	errc := make(chan error, 1)
	go func() {
		_, err := v.CallTool(context.Background(), "slow", json.RawMessage(`{"id":"k1"}`))
		errc <- err
	}()
	n.wait(t, "test/started", "k1")
	if err := syscall.Kill(pid1, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrSessionLost) || !strings.Contains(err.Error(), `"victim"`) {
			t.Fatalf("in-flight call error = %v, want ErrSessionLost naming the server", err)
		}
		// "transport closed" alone did not say the server was killed.
		if !strings.Contains(err.Error(), "(the server process ended: signal: killed)") {
			t.Errorf("in-flight call error = %v, want it to say how the server ended", err)
		}
		t.Logf("in-flight call: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("in-flight call did not return after the server was killed")
	}
	pid2 := callPID(t, v, "pid")
	if pid2 == pid1 {
		t.Fatalf("same pid %d after kill", pid1)
	}
	st := p.Status()[0]
	if st.State != StateReady || st.Connects != 2 || st.PID != pid2 {
		t.Errorf("status after reconnect = %+v", st)
	}
	if !pidGone(pid1) {
		t.Errorf("killed process %d was not reaped", pid1)
	}
}

// 100 calls in flight at once on one session: the barrier tool returns only
// when all 100 have reached the server together.
func TestConcurrentCallsOneSession(t *testing.T) {
	t.Parallel()
	cfg := stdioTestServer("conc")
	cfg.MaxConcurrent = 100
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"conc": cfg}})
	v := newTestView(t, p, nil, nil, nil)
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := v.CallTool(ctx, "barrier", json.RawMessage(`{"n":100}`))
			if err == nil && res.Text != "100" {
				err = fmt.Errorf("barrier saw %s in flight", res.Text)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if st := p.Status()[0]; st.Connects != 1 {
		t.Errorf("connects = %d, want all calls on one session", st.Connects)
	}
}

// MaxConcurrent is a limit: with 2 slots, the third call waits for one.
func TestMaxConcurrentLimits(t *testing.T) {
	t.Parallel()
	n := newNotes()
	cfg := stdioTestServer("limit")
	cfg.MaxConcurrent = 2
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"limit": cfg}}, n.option())
	v := newTestView(t, p, nil, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 2)
	for _, id := range []string{"a", "b"} {
		go func() {
			_, err := v.CallTool(ctx, "slow", json.RawMessage(`{"id":"`+id+`"}`))
			done <- err
		}()
		n.wait(t, "test/started", id)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelShort()
	_, err := v.CallTool(short, "echo", json.RawMessage(`{"text":"x"}`))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "free slot") {
		t.Fatalf("third call = %v, want a wait for a free slot", err)
	}
	cancel()
	_, _ = <-done, <-done // both calls have ended (how is checked above)
	call(t, v, "echo", map[string]any{"text": "x"})
}

// Cancelling a call's context sends notifications/cancelled (HTTP, SSE,
// stdio; an in-process handler shares the caller's context): the server's
// handler sees its context end, and the session still serves calls.
func TestCancellationForwarded(t *testing.T) {
	t.Parallel()
	for _, tc := range transportCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newServerWatch()
			cfg, opts := tc.setup(t, w)
			p := newTestPool(t, cfg, opts...)
			v := newTestView(t, p, nil, nil, nil)
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := v.CallTool(ctx, "slow", json.RawMessage(`{"id":"c1"}`))
				errc <- err
			}()
			w.waitStarted(t, "c1")
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled call = %v", err)
			}
			w.waitCancelled(t, "c1")
			if tc.cancelNote {
				w.waitCancelNote(t, "c1")
			}
			call(t, v, "echo", map[string]any{"text": "still fine"})
		})
	}
}

// An HTTP session the server no longer knows (404) is replaced, and the
// refused call is sent again on the new session.
func TestHTTPSessionExpired(t *testing.T) {
	t.Parallel()
	url, restart := httpTestServer(t, nil)
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"web": {URL: url}}})
	v := newTestView(t, p, nil, nil, nil)
	call(t, v, "echo", map[string]any{"text": "before"})
	restart()
	if got := call(t, v, "echo", map[string]any{"text": "after"}).Text; got != "after" {
		t.Fatalf("echo after restart = %q", got)
	}
	if st := p.Status()[0]; st.Connects != 2 {
		t.Errorf("connects = %d, want 2 (reconnected after 404)", st.Connects)
	}
}

// wedgeable is a streamable HTTP test server that wedge turns into one
// restarted wedged: it knows no session (404) and holds each initialize
// until release is closed, then answers 500.
type wedgeable struct {
	url        string
	wedge      func()
	initialize chan struct{} // an initialize reached the wedged server
	release    chan struct{}
}

func newWedgeable(t *testing.T) *wedgeable {
	t.Helper()
	sw := &swapHandler{}
	sw.set(server.NewStreamableHTTPServer(newTestMCPServer("web"), server.WithStateful(true)))
	ts := httptest.NewServer(sw)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	w := &wedgeable{url: ts.URL + "/mcp", initialize: make(chan struct{}, 1), release: make(chan struct{})}
	wedged := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || !strings.Contains(string(body), `"initialize"`) {
			http.Error(rw, "no such session", http.StatusNotFound)
			return
		}
		select {
		case w.initialize <- struct{}{}:
		default: // later attempts
		}
		select {
		case <-w.release:
		case <-r.Context().Done():
		}
		http.Error(rw, "wedged", http.StatusInternalServerError)
	})
	w.wedge = func() { sw.set(wedged) }
	return w
}

// waitInitialize waits until an initialize reached the wedged server.
func (w *wedgeable) waitInitialize(t *testing.T) {
	t.Helper()
	select {
	case <-w.initialize:
	case <-time.After(30 * time.Second):
		t.Fatal("no reconnection attempt")
	}
}

// TestCallsGiveUpWithTheFailedAttempt: calls that find the server
// reconnecting wait for that attempt, and fail with its error when it fails.
// They waited for a session until their own context ended instead: a job's
// whole timeout, for a server whose every attempt failed (here an HTTP
// server restarted wedged: it forgets the session and its initialize hangs
// until the connect timeout). Resource listings do not wait at all
// (TestResourceListingSkipsReconnectingServers).
func TestCallsGiveUpWithTheFailedAttempt(t *testing.T) {
	t.Parallel()
	w := newWedgeable(t)
	waiting := make(chan string, 10) // a call started waiting for a session
	s := DefaultSettings()
	s.HealthInterval = 0
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"web": {URL: w.url}}}, WithSettings(s),
		func(o *options) { o.acquireHook = func(string) { waiting <- "web" } })
	v := newTestView(t, p, nil, nil, nil)
	call(t, v, "echo", map[string]any{"text": "before"})
	w.wedge()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type outcome struct {
		what string
		err  error
	}
	done := make(chan outcome, 2)
	start := func(what string, f func() error) {
		go func() { done <- outcome{what, f()} }()
		waitFor(t, waiting, "web", what+" waiting for a session")
	}
	// Refused with 404, it is sent again once there is a session.
	start("the refused call", func() error {
		_, err := v.CallTool(ctx, "echo", json.RawMessage(`{"text":"refused"}`))
		return err
	})
	w.waitInitialize(t)
	// Arriving while the attempt runs.
	start("a new call", func() error {
		_, err := v.CallTool(ctx, "echo", json.RawMessage(`{"text":"new"}`))
		return err
	})
	close(w.release)
	for range 2 {
		o := <-done
		if !errors.Is(o.err, ErrServerUnavailable) || !strings.Contains(o.err.Error(), "500") || ctx.Err() != nil {
			t.Errorf("%s: %v, want the failed attempt's error (ErrServerUnavailable, 500)", o.what, o.err)
		}
	}
}

// TestResourceListingSkipsReconnectingServers: every job lists its servers'
// resources before its first model request; a shared server being
// reconnected is left out of that listing rather than waited for. Jobs
// waited for the attempt (up to the connect timeout, at every attempt of a
// server that came back wedged), also jobs that used only other servers.
func TestResourceListingSkipsReconnectingServers(t *testing.T) {
	t.Parallel()
	w := newWedgeable(t)
	waiting := make(chan string, 10) // something started waiting for a session
	s := DefaultSettings()
	s.HealthInterval = 0
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"web": {URL: w.url}}}, WithSettings(s),
		WithInProcessServer("good", newTestMCPServer("good"), ServerConfig{}),
		func(o *options) { o.acquireHook = func(name string) { waiting <- name } })
	v := newTestView(t, p, nil, nil, nil)
	call(t, v, "web__echo", map[string]any{"text": "before"})
	w.wedge()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	called := make(chan error, 1)
	go func() {
		_, err := v.CallTool(ctx, "web__echo", json.RawMessage(`{"text":"refused"}`))
		called <- err
	}()
	waitFor(t, waiting, "web", "the refused call waiting for a session")
	w.waitInitialize(t)
	type listing struct {
		rs  []Resource
		err error
	}
	listed := make(chan listing, 1)
	go func() {
		rs, err := v.ListResources(ctx)
		listed <- listing{rs, err}
	}()
	select {
	case l := <-listed:
		if l.err != nil || len(l.rs) != 2 || l.rs[0].Server != "good" {
			t.Errorf("resources = %+v, %v; want good's two", l.rs, l.err)
		}
	case name := <-waiting:
		t.Errorf("the resource listing waited for %s's session", name)
		defer func() { <-listed }() // it ends with the attempt
	}
	close(w.release)
	if err := <-called; !errors.Is(err, ErrServerUnavailable) {
		t.Errorf("the refused call: %v", err)
	}
}

// A server that cannot start is reported and retried; it does not stop the
// others, and calls to it fail fast with ErrServerUnavailable.
func TestFailingServerDoesNotStopOthers(t *testing.T) {
	t.Parallel()
	cfg := Config{Servers: map[string]ServerConfig{
		"good":    stdioTestServer("good"),
		"missing": {Command: "/nonexistent/mcp-server"},
		"crashes": {Command: "sh", Args: []string{"-c", "echo boom >&2; exit 3"}},
	}}
	p := newTestPool(t, cfg, WithBackoff(time.Hour, time.Hour))
	byName := map[string]ServerStatus{}
	for _, st := range p.Status() {
		byName[st.Name] = st
	}
	if byName["good"].State != StateReady {
		t.Errorf("good = %+v", byName["good"])
	}
	for _, name := range []string{"missing", "crashes"} {
		if byName[name].State != StateFailed || byName[name].Error == "" {
			t.Errorf("%s = %+v, want failed with an error", name, byName[name])
		}
	}
	if !strings.Contains(byName["crashes"].Error, "boom") {
		t.Errorf("crashes error %q does not carry the server's stderr", byName["crashes"].Error)
	}
	v := newTestView(t, p, nil, nil, nil)
	call(t, v, "echo", map[string]any{"text": "ok"})
}

// Per-job servers: each View gets its own process, reused across its calls
// and gone when the View closes.
func TestPerJobSessions(t *testing.T) {
	t.Parallel()
	cfg := stdioTestServer("browser")
	cfg.SessionMode = SessionPerJob
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"browser": cfg}})
	shared := p.Status()[0].PID
	v1 := newTestView(t, p, []string{"browser"}, nil, nil)
	v2 := newTestView(t, p, []string{"browser"}, nil, nil)
	a1, a2 := callPID(t, v1, "pid"), callPID(t, v1, "pid")
	b := callPID(t, v2, "pid")
	if a1 != a2 {
		t.Errorf("one job got two sessions: %d, %d", a1, a2)
	}
	if a1 == b || a1 == shared || b == shared {
		t.Errorf("jobs share a session: job1 %d job2 %d discovery %d", a1, b, shared)
	}
	if err := v1.Close(); err != nil {
		t.Fatal(err)
	}
	if !pidGone(a1) {
		t.Errorf("per-job process %d still there after View.Close", a1)
	}
	if _, err := v1.CallTool(context.Background(), "pid", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("call on closed view = %v", err)
	}
	if got := callPID(t, v2, "pid"); got != b {
		t.Errorf("job2 session changed: %d -> %d", b, got)
	}
}

func TestViewServersAndGlobs(t *testing.T) {
	t.Parallel()
	a := stdioTestServer("a")
	a.Deny = []string{"slow", "barrier", "add_*", "saw_*"}
	b := stdioTestServer("b")
	b.Allow = []string{"echo", "pid"}
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{
		"a": a, "b": b, "off": {Command: "true", Disabled: true},
	}}, WithInProcessServer("c", newTestMCPServer("c"), ServerConfig{Allow: []string{"add_*"}}))
	if !p.HasServer("a") || p.HasServer("off") || p.HasServer("nope") {
		t.Error("HasServer wrong")
	}
	if got := strings.Join(p.Servers(), ","); got != "a,b,c" {
		t.Errorf("Servers = %s", got)
	}
	if got := strings.Join(p.Registry().Names(), ","); got != "a__echo,a__pid,add_tool,b__echo,b__pid" {
		t.Errorf("registry names = %s", got)
	}
	tests := []struct {
		name        string
		servers     []string
		allow, deny []string
		want        string
		err         error
	}{
		{"all", nil, nil, nil, "a__echo,a__pid,add_tool,b__echo,b__pid", nil},
		{"one server", []string{"b"}, nil, nil, "b__echo,b__pid", nil},
		{"allow by original name", nil, []string{"echo"}, nil, "a__echo,b__echo", nil},
		{"deny by qualified name", nil, nil, []string{"a__*"}, "add_tool,b__echo,b__pid", nil},
		{"unknown server", []string{"a", "nope"}, nil, nil, "", ErrUnknownServer},
		{"disabled server", []string{"off"}, nil, nil, "", ErrUnknownServer},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := p.View("job", tc.servers, tc.allow, tc.deny)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			var names []string
			for _, tool := range v.Tools() {
				names = append(names, tool.Name)
			}
			if got := strings.Join(names, ","); got != tc.want {
				t.Errorf("tools = %s, want %s", got, tc.want)
			}
		})
	}
	v := newTestView(t, p, []string{"b"}, nil, nil)
	if _, err := v.CallTool(context.Background(), "a__echo", nil); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("call outside the view = %v, want ErrUnknownTool", err)
	}
	if _, err := p.View("job", nil, []string{"["}, nil); err == nil {
		t.Error("bad glob accepted")
	}
}

// Close leaves no child process: every pid the pool started is gone.
func TestCloseLeavesNoChild(t *testing.T) {
	t.Parallel()
	perJob := stdioTestServer("pj")
	perJob.SessionMode = SessionPerJob
	ctx := context.Background()
	p, err := NewPool(ctx, Config{Servers: map[string]ServerConfig{
		"s1": stdioTestServer("s1"), "s2": stdioTestServer("s2"), "pj": perJob,
		// A wrapper shell whose server is a grandchild: the process group goes too.
		"wrapped": {Command: "sh", Args: []string{"-c", "\"$0\" -test.run='^$'; true", stdioTestServerPath()}, Env: map[string]string{testServerEnv: "wrapped", "GORACE": "atexit_sleep_ms=0"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := p.View("job", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, st := range p.Status() {
		if st.State != StateReady {
			t.Fatalf("%s not ready: %+v", st.Name, st)
		}
		pids = append(pids, st.PID)
	}
	pids = append(pids, callPID(t, v, "pj__pid"), callPID(t, v, "wrapped__pid"))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if !pidGone(pid) {
			t.Errorf("process %d survived Pool.Close", pid)
		}
	}
	if _, err := p.View("late", nil, nil, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("View after Close = %v", err)
	}
}

// The pool offers 2025-11-25 in initialize and sends no server/discover
// probe, so a server that ignores the probe (and would cost mcp-go's default
// client its 5 s probe timeout) connects on the handshake alone.
func TestNoDiscoverProbe(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"old": stdioTestServer("nodiscover")}})
	v := newTestView(t, p, nil, nil, nil)
	if got := call(t, v, "saw_discover", nil).Text; got != "false" {
		t.Errorf("saw_discover = %s", got)
	}
	if st := p.Status()[0]; st.Protocol != "2025-11-25" || st.ServerName != "nodiscover" {
		t.Errorf("status = %+v", st)
	}
}

// Without list_changed (the server does not announce it), the slow resync
// timer still picks up a changed tool list.
func TestResyncTimer(t *testing.T) {
	t.Parallel()
	srv := server.NewMCPServer("quiet", "1", server.WithToolCapabilities(false))
	srv.AddTool(mcp.NewTool("one"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("1"), nil
	})
	p := newTestPool(t, Config{}, WithInProcessServer("quiet", srv, ServerConfig{}), WithResyncInterval(20*time.Millisecond))
	changed := make(chan struct{}, 10)
	p.Registry().OnChange(func() { changed <- struct{}{} })
	srv.AddTool(mcp.NewTool("two"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("2"), nil
	})
	timeout := time.After(10 * time.Second)
	for !p.Registry().Has("two") {
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("resync timer did not pick up the new tool: %v", p.Registry().Names())
		}
	}
}

// A hung server (stopped, so it never answers) fails its health check and is
// replaced; calls then reach the new process.
func TestHealthCheckReplacesHungServer(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"hung": stdioTestServer("hung")}}, WithHealthInterval(100*time.Millisecond))
	v := newTestView(t, p, nil, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var pid1 int
	for {
		// On a loaded machine a ping can miss its 100 ms, and the session is
		// replaced before this test hangs it: then hang the new one.
		res, err := v.CallTool(ctx, "pid", nil)
		if errors.Is(err, ErrSessionLost) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if pid1, err = strconv.Atoi(res.Text); err != nil {
			t.Fatal(err)
		}
		if stopChild(t, pid1) {
			break
		}
	}
	for {
		res, err := v.CallTool(ctx, "pid", nil)
		if errors.Is(err, ErrSessionLost) {
			continue // this call went to the hung process
		}
		if err != nil {
			t.Fatal(err)
		}
		if res.Text == fmt.Sprint(pid1) {
			t.Fatalf("hung process %d answered", pid1)
		}
		break
	}
	if !pidGone(pid1) {
		t.Errorf("hung process %d not killed", pid1)
	}
}

// TestStuckStdinWrite: a server that stops reading its stdin (hung, or too
// busy to read) leaves a request larger than the pipe's buffer half
// written. mcp-go's stdio transport writes without looking at the context,
// holding a lock every request takes: such a call outlived its deadline,
// the health checks waited behind it, so the server was never replaced,
// and Close waited for the stuck run loop for ever.
func TestStuckStdinWrite(t *testing.T) {
	t.Parallel()
	// Ten checks in a row unanswered replace it: a second or more after
	// it stops, so the call below is sent to it first.
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"stuck": stdioTestServer("stuck")}},
		WithHealthInterval(100*time.Millisecond), WithHealthMisses(10))
	v := newTestView(t, p, nil, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Far beyond a pipe's buffer (64 KiB by default, 1 MiB at most); made
	// before the server is stopped (slow under -race).
	big, _ := json.Marshal(map[string]string{"text": strings.Repeat("x", 4<<20)})
	var pid1 int
	for {
		res, err := v.CallTool(ctx, "pid", nil)
		if errors.Is(err, ErrSessionLost) {
			continue // a ping missed under load: the session was replaced
		}
		if err != nil {
			t.Fatal(err)
		}
		if pid1, err = strconv.Atoi(res.Text); err != nil {
			t.Fatal(err)
		}
		if stopChild(t, pid1) {
			break
		}
	}
	cctx, ccancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer ccancel()
	done := make(chan error, 1)
	go func() {
		_, err := v.CallTool(cctx, "echo", big)
		done <- err
	}()
	select {
	case err := <-done: // its deadline, or the session killed under it
		if err == nil {
			t.Fatal("a call to a server that does not read its stdin succeeded")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a call to a server that does not read its stdin outlived its 500ms deadline by 20s")
	}
	for {
		res, err := v.CallTool(ctx, "pid", nil)
		if errors.Is(err, ErrSessionLost) {
			continue // this call went to the stopped process
		}
		if err != nil {
			t.Fatalf("the stopped server was not replaced: %v", err)
		}
		if res.Text == fmt.Sprint(pid1) {
			t.Fatalf("stopped process %d answered", pid1)
		}
		break
	}
	if !pidGone(pid1) {
		t.Errorf("stopped process %d not killed", pid1)
	}
}

// CallTimeout bounds a call; the server is told to stop.
func TestCallTimeout(t *testing.T) {
	t.Parallel()
	n := newNotes()
	cfg := stdioTestServer("timeout")
	cfg.CallTimeout = Duration(200 * time.Millisecond)
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"t": cfg}}, n.option())
	v := newTestView(t, p, nil, nil, nil)
	_, err := v.CallTool(context.Background(), "slow", json.RawMessage(`{"id":"t1"}`))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	n.wait(t, "test/cancelled", "t1")
}

// TestInProcessClashIsStable: of several in-process servers named like
// configured ones, the error names the same one each time.
func TestInProcessClashIsStable(t *testing.T) {
	t.Parallel()
	cfg := Config{Servers: map[string]ServerConfig{}}
	var opts []Option
	for _, n := range []string{"a", "b", "c", "d"} {
		cfg.Servers[n] = ServerConfig{Command: "x"}
		opts = append(opts, WithInProcessServer(n, newTestMCPServer(n), ServerConfig{}))
	}
	var first string
	for i := range 20 {
		_, err := NewPool(context.Background(), cfg, opts...)
		if err == nil {
			t.Fatal("no error for servers configured twice")
		}
		if i == 0 {
			first = err.Error()
		} else if err.Error() != first {
			t.Fatalf("error varies: %q, then %q", first, err)
		}
	}
}
