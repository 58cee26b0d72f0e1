package toolcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// logRecords is a slog handler that hands every record to a channel, so a
// test can wait for the pool to report something.
type logRecords chan slog.Record

func (l logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l logRecords) Handle(_ context.Context, r slog.Record) error {
	select {
	case l <- r.Clone():
	default:
	}
	return nil
}
func (l logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logRecords) WithGroup(string) slog.Handler      { return l }

// next waits for the next record whose message is msg.
func (l logRecords) next(t *testing.T, msg string, within time.Duration) slog.Record {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case r := <-l:
			if r.Message == msg {
				return r
			}
		case <-timeout:
			t.Fatalf("no log %q within %s", msg, within)
			return slog.Record{}
		}
	}
}

func attr(r slog.Record, key string) slog.Value {
	var v slog.Value
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value
			return false
		}
		return true
	})
	return v
}

func statusOf(p *Pool, name string) ServerStatus {
	for _, st := range p.Status() {
		if st.Name == name {
			return st
		}
	}
	return ServerStatus{}
}

// hostileCase is one badly behaved stdio server ("bad") beside a good one
// ("good", in process); after check, "good" must still answer.
type hostileCase struct {
	mode     string
	settings func(*Settings)
	check    func(t *testing.T, p *Pool, v *View, logs logRecords, count string)
}

// callErr calls name with text and returns the result and error.
func callErr(v *View, name, text string) (Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, _ := json.Marshal(map[string]string{"text": text})
	return v.CallTool(ctx, name, b)
}

func TestHostileStdioServers(t *testing.T) {
	t.Parallel()
	cases := []hostileCase{
		{mode: "noinit", settings: func(s *Settings) { s.ConnectTimeout = 2 * time.Second }, check: func(t *testing.T, p *Pool, v *View, logs logRecords, _ string) {
			st := statusOf(p, "bad")
			if st.State == StateReady || !strings.Contains(st.Error, "initialize") || !strings.Contains(st.Error, "deadline") {
				t.Errorf("status = %+v, want a failed initialize with its deadline", st)
			}
			// It is retried after a backoff; each attempt gives up at its
			// connect timeout, not before, not much later.
			var last time.Time
			for i := range 3 {
				r := logs.next(t, "MCP server connection failed", 20*time.Second)
				if w := attr(r, "retry_in").Duration(); w <= 0 {
					t.Errorf("attempt %d: retry in %s", i, w)
				}
				if !last.IsZero() {
					if d := r.Time.Sub(last); d < 2*time.Second || d > 2*time.Second+time.Second+15*time.Second { // the upper bound with room for a loaded machine
						t.Errorf("attempts %s apart, connect timeout 2s", d)
					}
				}
				last = r.Time
			}
			_, err := v.CallTool(context.Background(), "bad_tool_never_listed", nil)
			if !errors.Is(err, ErrUnknownTool) {
				t.Errorf("call: %v", err)
			}
		}},
		{mode: "garbage", check: func(t *testing.T, p *Pool, v *View, _ logRecords, _ string) {
			// The partial line written after tools/list swallows the next
			// message, the answer to this call: it ends at its deadline.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if _, err := v.CallTool(ctx, "bad__echo", json.RawMessage(`{"text":"lost"}`)); err != nil &&
				(!errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `server "bad"`)) {
				t.Errorf("call after a partial line: %v", err)
			}
			for i := range 3 {
				res, err := callErr(v, "bad__echo", "hi"+strconv.Itoa(i))
				if err != nil || res.Text != "hi"+strconv.Itoa(i) {
					t.Fatalf("echo = %+v, %v", res, err)
				}
			}
		}},
		{mode: "stderrflood", check: func(t *testing.T, p *Pool, v *View, _ logRecords, _ string) {
			for i := range 20 {
				if res, err := callErr(v, "bad__echo", "x"); err != nil || res.Text != "x" {
					t.Fatalf("echo %d = %+v, %v", i, res, err)
				}
			}
		}},
		{mode: "exitafterlist", settings: func(s *Settings) { s.BackoffInitial, s.BackoffMax = 100*time.Millisecond, 2*time.Second },
			check: func(t *testing.T, p *Pool, v *View, logs logRecords, count string) {
				// Sessions that die at once are reconnected with backoff, not in a loop.
				start := time.Now()
				var waits []time.Duration
				timeout := time.After(30 * time.Second)
				for len(waits) < 5 {
					select {
					case r := <-logs:
						// The child may die before or after the session is published.
						if r.Message == "MCP session lost; reconnecting" || r.Message == "MCP server connection failed" {
							waits = append(waits, attr(r, "retry_in").Duration())
						}
					case <-timeout:
						t.Fatalf("only %d reconnects logged within 30s: %v", len(waits), waits)
					}
				}
				// The first published session to die reconnects at once (a
				// single crash costs no wait); every other reconnect backs off.
				zero := 0
				for _, w := range waits {
					if w <= 0 {
						zero++
					}
				}
				if zero > 1 {
					t.Errorf("%d reconnects without a wait: %v", zero, waits)
				}
				b, _ := os.ReadFile(count)
				if n := strings.Count(string(b), "\n"); n > len(waits)+2 {
					t.Errorf("%d starts in %s for %d reconnects logged", n, time.Since(start), len(waits))
				}
				if st := statusOf(p, "bad"); st.State != StateReady && !strings.Contains(st.Error, "exited") {
					t.Errorf("status = %+v", st)
				}
			}},
		{mode: "listflood", check: func(t *testing.T, p *Pool, v *View, _ logRecords, _ string) {
			changes := make(chan struct{}, 1000)
			p.Registry().OnChange(func() {
				select {
				case changes <- struct{}{}:
				default:
				}
			})
			lists := func() int {
				t.Helper()
				res, err := callErr(v, "bad__echo", "lists")
				if err != nil {
					t.Fatal(err)
				}
				n, _ := strconv.Atoi(res.Text)
				return n
			}
			start, before := time.Now(), lists()
			for i := range 50 {
				cs := time.Now()
				if res, err := callErr(v, "bad__echo", "x"); err != nil || res.Text != "x" {
					t.Fatalf("echo %d = %+v, %v", i, res, err)
				}
				if d := time.Since(cs); d > 5*time.Second {
					t.Errorf("echo %d took %s", i, d)
				}
			}
			n := lists() - before
			elapsed := time.Since(start)
			if limit := int(elapsed/listChangedGap) + 2; n > limit {
				t.Errorf("%d tools/list in %s of list_changed flood, want at most %d (connects %d)", n, elapsed, limit, statusOf(p, "bad").Connects)
			}
			if len(changes) > 0 {
				t.Errorf("the registry changed %d times; the list never did", len(changes))
			}
		}},
		{mode: "cursorloop", settings: func(s *Settings) { s.ConnectTimeout = 5 * time.Second }, check: func(t *testing.T, p *Pool, v *View, _ logRecords, _ string) {
			st := statusOf(p, "bad")
			if st.State == StateReady || !strings.Contains(st.Error, "cursor") {
				t.Errorf("status = %+v, want a repeated-cursor failure", st)
			}
			if _, ok := p.Registry().Get("bad__echo"); ok {
				t.Errorf("a failed server's tool is listed")
			}
		}},
		{mode: "hugelist", settings: func(s *Settings) { s.ConnectTimeout = 60 * time.Second }, check: func(t *testing.T, p *Pool, v *View, _ logRecords, _ string) {
			if st := statusOf(p, "bad"); st.State != StateReady || st.Tools != 12001 {
				t.Fatalf("status = %+v", st)
			}
			if _, ok := p.Registry().Get("tool_11999"); !ok {
				t.Errorf("tool_11999 missing")
			}
			// The catalog's search index is built (and waited for: it is the
			// registry's own goroutine, which would outlive the test).
			if hits := p.Registry().Search("generated tool number 123", 3); len(hits) == 0 {
				t.Errorf("no search hits")
			}
			if res, err := callErr(v, "tool_7", "x"); err != nil || res.Text != "x" {
				t.Errorf("tool_7 = %+v, %v", res, err)
			}
		}},
		{mode: "bigschema", settings: func(s *Settings) { s.ConnectTimeout = 3 * time.Minute }, check: func(t *testing.T, p *Pool, v *View, _ logRecords, _ string) {
			// Under load the connect outlasts newTestPool's 60 s: wait for it.
			changed := make(chan struct{}, 1)
			p.Registry().OnChange(func() {
				select {
				case changed <- struct{}{}:
				default:
				}
			})
			timeout := time.After(3 * time.Minute)
			for !p.Registry().Has("big") {
				select {
				case <-changed:
				case <-timeout:
					t.Fatalf("big not listed: %+v", statusOf(p, "bad"))
				}
			}
			tool, ok := p.Registry().Get("big")
			if !ok || len(tool.InputSchema) < 5<<20 {
				t.Fatalf("big: %v, %d bytes", ok, len(tool.InputSchema))
			}
			if hits := p.Registry().Search("echo text", 3); len(hits) == 0 {
				t.Errorf("no search hits")
			}
		}},
		{mode: "bigresult", settings: func(s *Settings) { s.ConnectTimeout = 60 * time.Second }, check: func(t *testing.T, p *Pool, v *View, _ logRecords, _ string) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // 10 MiB under -race and load
			defer cancel()
			res, err := v.CallTool(ctx, "bad__echo", json.RawMessage(`{"text":"x"}`))
			if err != nil || len(res.Text) != 10<<20 {
				t.Fatalf("result: %d bytes, %v", len(res.Text), err)
			}
		}},
		// A line without end: mcp-go reads stdout a whole line at a time,
		// and the worker's memory grew with it (1 GiB here; without end
		// from a server printing a binary file).
		{mode: "endlessresult", check: func(t *testing.T, p *Pool, v *View, logs logRecords, _ string) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // 64 MiB under -race and load
			defer cancel()
			_, err := v.CallTool(ctx, "bad__echo", json.RawMessage(`{"text":"x"}`))
			if err == nil || !strings.Contains(err.Error(), "64 MiB") {
				t.Fatalf("call: %v, want the message bound", err)
			}
			t.Logf("call: %v", err)
			// The server is replaced, not left writing, and the log says why.
			if r := logs.next(t, "MCP session lost; reconnecting", time.Minute); !strings.Contains(attr(r, "err").String(), "64 MiB") {
				t.Errorf("session lost: %v", attr(r, "err"))
			}
		}},
		{mode: "endlessinit", settings: func(s *Settings) { s.ConnectTimeout = 60 * time.Second }, check: func(t *testing.T, p *Pool, v *View, _ logRecords, _ string) {
			if st := statusOf(p, "bad"); st.State == StateReady || !strings.Contains(st.Error, "64 MiB") {
				t.Errorf("status = %+v, want the message bound", st)
			}
			t.Logf("status: %s", statusOf(p, "bad").Error)
		}},
		{mode: "names", check: func(t *testing.T, p *Pool, v *View, logs logRecords, _ string) {
			// The nameless tool and the second definition of dup are left
			// out, and said to be; the rest stay.
			left := attr(logs.next(t, "MCP tool definitions left out", 10*time.Second), "err").String()
			for _, want := range []string{"without a name", `"dup": listed again`} {
				if !strings.Contains(left, want) {
					t.Errorf("left out: %s; want %q", left, want)
				}
			}
			seen := map[string]string{}
			originals := map[string]bool{}
			for _, tool := range p.Registry().List() {
				if !ValidName(tool.Name) {
					t.Errorf("invalid name %q (for %q)", tool.Name, tool.Original)
				}
				if o, dup := seen[tool.Name]; dup {
					t.Errorf("%q names both %q and %q", tool.Name, o, tool.Original)
				}
				seen[tool.Name] = tool.Original
				if tool.Server == "bad" {
					originals[tool.Original] = true
				}
			}
			for _, o := range []string{"a.b", "a b", "a/b", "a-b", "日本語", "emoji🙂", "with space", strings.Repeat("x", 200), strings.Repeat("x", 199) + "y", "dup"} {
				if !originals[o] {
					t.Errorf("tool %q missing: %v", o, p.Registry().Names())
				}
			}
			// echo is offered by both servers: each is qualified.
			for _, n := range []string{"bad__echo", "good__echo"} {
				if _, ok := p.Registry().Get(n); !ok {
					t.Errorf("%s missing", n)
				}
			}
		}},
		// A line nested deeper than encoding/json decodes: mcp-go dropped
		// it without a word, and the request it answered waited for its
		// deadline (here the connect timeout, at every attempt).
		{mode: "deeplist", settings: func(s *Settings) { s.ConnectTimeout = time.Minute }, check: func(t *testing.T, p *Pool, v *View, _ logRecords, _ string) {
			if st := statusOf(p, "bad"); st.State == StateReady || !strings.Contains(st.Error, "levels deep") {
				t.Errorf("status = %+v, want the nesting bound", st)
			}
			t.Logf("status: %s", statusOf(p, "bad").Error)
		}},
		// A JSON-RPC error's message was kept whole: 5 MiB here (up to
		// 64 MiB) in Status and in the line logged at every attempt.
		{mode: "listerror", check: func(t *testing.T, p *Pool, v *View, logs logRecords, _ string) {
			st := statusOf(p, "bad")
			if st.State == StateReady || !strings.Contains(st.Error, "listing failed: xxx") || len(st.Error) > 16<<10 {
				t.Errorf("status = %s, %d bytes: %.300s; want the error, cut", st.State, len(st.Error), st.Error)
			}
			r := logs.next(t, "MCP server connection failed", 20*time.Second)
			if n := len(attr(r, "err").String()); n > 16<<10 {
				t.Errorf("the connection failure logged is %d bytes", n)
			}
		}},
		{mode: "oddresults", check: func(t *testing.T, p *Pool, v *View, _ logRecords, _ string) {
			// The answer nested too deep fails at once, and so does not
			// cost the session (nor does the notification behind it).
			if _, err := callErr(v, "bad__echo", "deep"); err == nil || !strings.Contains(err.Error(), "levels deep") {
				t.Errorf("structuredContent nested too deep: %v, want the nesting bound", err)
			}
			res, err := callErr(v, "bad__echo", "iserror")
			if err != nil || !res.IsError || res.Text == "" {
				t.Errorf("isError without content: %+v, %v", res, err)
			}
			res, err = callErr(v, "bad__echo", "unknown")
			if err != nil || !strings.Contains(res.Text, "after") {
				t.Errorf("unknown content type: %+v, %v", res, err)
			}
			res, err = callErr(v, "bad__echo", "link")
			if err != nil || !strings.Contains(res.Text, "file:///etc/hosts") {
				t.Errorf("resource link: %+v, %v", res, err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			count := filepath.Join(t.TempDir(), "starts")
			s := DefaultSettings()
			s.ConnectTimeout, s.BackoffInitial, s.BackoffMax = 10*time.Second, 100*time.Millisecond, time.Second
			s.HealthInterval = 0
			if tc.settings != nil {
				tc.settings(&s)
			}
			logs := make(logRecords, 1000)
			start := time.Now()
			p := newTestPool(t, Config{Servers: map[string]ServerConfig{"bad": hostileServer(tc.mode, map[string]string{hostileCountEnv: count})}},
				WithSettings(s), WithLogger(slog.New(logs)),
				WithInProcessServer("good", newTestMCPServer("good"), ServerConfig{}))
			if d := time.Since(start); d > s.ConnectTimeout+5*time.Second {
				t.Errorf("NewPool took %s (connect timeout %s)", d, s.ConnectTimeout)
			}
			v := newTestView(t, p, nil, nil, nil)
			tc.check(t, p, v, logs, count)
			good := "echo"
			if _, ok := p.Registry().Get("good__echo"); ok {
				good = "good__echo"
			}
			if res := call(t, v, good, map[string]any{"text": "still here"}); res.Text != "still here" {
				t.Errorf("good echo = %q", res.Text)
			}
		})
	}
}

// TestHostileHTTPServers points the pool at HTTP endpoints that are not
// (or not only) MCP servers; a good in-process server runs beside each.
func TestHostileHTTPServers(t *testing.T) {
	t.Parallel()
	endless := func(w http.ResponseWriter, r *http.Request, contentType string) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(http.StatusOK)
		prefix := `{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"`
		if contentType == "text/event-stream" {
			prefix = "event: message\ndata: " + prefix
		}
		_, _ = io.WriteString(w, prefix)
		chunk := []byte(strings.Repeat("x", 1<<20))
		// At most 1 GiB, so that a client without a bound fails the test
		// rather than the machine.
		for range 1024 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}
	cases := []struct {
		name    string
		handler func(url *string) http.HandlerFunc
		want    string // in the server's Status error
		typ     string // "" (streamable HTTP) or "sse"
	}{
		{"500", func(*string) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "internal error "+strings.Repeat("<html>", 1<<20), http.StatusInternalServerError)
			}
		}, "500", ""},
		{"redirect-loop", func(url *string) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, r.URL.Path, http.StatusTemporaryRedirect)
			}
		}, "redirects", ""},
		{"hang", func(*string) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost {
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			}
		}, "deadline", ""},
		{"sse-500", func(*string) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, strings.Repeat("<html>", 1<<20), http.StatusInternalServerError)
			}
		}, "500", "sse"},
		{"sse-no-endpoint", func(*string) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			}
		}, "endpoint", "sse"},
		// No response headers at all (a proxy with a dead backend): the
		// stream's GET runs on the session's own context, so only the
		// connect timeout can end it.
		{"sse-no-headers", func(*string) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
		}, "deadline", "sse"},
		{"sse-endless-line", func(*string) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) { endless(w, r, "text/event-stream") }
		}, "larger than", "sse"},
		{"endless-json", func(*string) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) { endless(w, r, "application/json") }
		}, "larger than", ""},
		{"endless-sse-line", func(*string) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) { endless(w, r, "text/event-stream") }
		}, "larger than", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var url string
			ts := httptest.NewServer(tc.handler(&url))
			t.Cleanup(func() {
				ts.CloseClientConnections()
				ts.Close()
			})
			url = ts.URL + "/mcp"
			s := DefaultSettings()
			s.ConnectTimeout, s.BackoffInitial, s.BackoffMax = 3*time.Second, 100*time.Millisecond, time.Second
			if tc.want == "larger than" {
				s.ConnectTimeout = 30 * time.Second // time to send 64 MiB under -race
			}
			if tc.want == "larger than" && tc.typ == "" {
				// Streamable HTTP fails at the bound, long before this: 30 s
				// was too short to send 64 MiB under -race at a load of 13.
				// (Legacy SSE waits for its endpoint event until the connect
				// timeout, so its cases keep 30 s.)
				s.ConnectTimeout = 3 * time.Minute
			}
			logs := make(logRecords, 1000)
			start := time.Now()
			p := newTestPool(t, Config{Servers: map[string]ServerConfig{"bad": {URL: url, Type: tc.typ}}},
				WithSettings(s), WithLogger(slog.New(logs)),
				WithInProcessServer("good", newTestMCPServer("good"), ServerConfig{}))
			if d := time.Since(start); d > s.ConnectTimeout+5*time.Second {
				t.Errorf("NewPool took %s (connect timeout %s)", d, s.ConnectTimeout)
			}
			st := statusOf(p, "bad")
			if st.State != StateFailed || !strings.Contains(st.Error, tc.want) || len(st.Error) > 8<<10 {
				t.Errorf("status = %s %d bytes %.500q, want failed with %q", st.State, len(st.Error), st.Error, tc.want)
			}
			for range 2 {
				if r := logs.next(t, "MCP server connection failed", s.ConnectTimeout+20*time.Second); attr(r, "retry_in").Duration() <= 0 {
					t.Errorf("no backoff: %v", r)
				}
			}
			v := newTestView(t, p, nil, nil, nil)
			if res := call(t, v, "echo", map[string]any{"text": "still here"}); res.Text != "still here" {
				t.Errorf("good echo = %q", res.Text)
			}
		})
	}
}

// TestUndecodableToolDefinitions: a tool definition mcp-go cannot decode (an
// inputSchema that is a string or a boolean, a "type" that is a number, a
// hint that is no boolean) costs that tool, said in the log, not the server:
// mcp-go decodes a tools/list page whole, so one such tool failed every
// connection attempt and the server never came up.
func TestUndecodableToolDefinitions(t *testing.T) {
	t.Parallel()
	// An mcp-go server sends any raw input schema (names are unique there,
	// and its annotations are typed).
	mcpgo := func() *server.MCPServer {
		s := newTestMCPServer("schemas")
		for _, d := range undecodableTools[1:5] {
			var def struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			}
			if err := json.Unmarshal([]byte(d), &def); err != nil {
				t.Fatal(err)
			}
			s.AddTool(mcp.NewToolWithRawSchema(def.Name, "", def.InputSchema), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("bad"), nil
			})
		}
		return s
	}
	cases := []struct {
		name  string
		setup func(t *testing.T) ServerConfig
		bad   []string // the tools left out
	}{
		{"stdio", func(*testing.T) ServerConfig { return hostileServer("schemas", nil) },
			[]string{"echo", "bad_string", "bad_bool", "bad_type", "bad_required", "bad_hint"}},
		{"http", func(t *testing.T) ServerConfig {
			ts := httptest.NewServer(server.NewStreamableHTTPServer(mcpgo(), server.WithStateful(true)))
			t.Cleanup(func() {
				ts.CloseClientConnections()
				ts.Close()
			})
			return ServerConfig{URL: ts.URL + "/mcp"}
		}, []string{"bad_string", "bad_bool", "bad_type", "bad_required"}},
		{"sse", func(t *testing.T) ServerConfig {
			return ServerConfig{URL: serveSSE(t, mcpgo(), nil), Type: TypeSSE}
		}, []string{"bad_string", "bad_bool", "bad_type", "bad_required"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := DefaultSettings()
			s.ConnectTimeout, s.HealthInterval = 30*time.Second, 0
			logs := make(logRecords, 1000)
			p := newTestPool(t, Config{Servers: map[string]ServerConfig{"srv": tc.setup(t)}}, WithSettings(s), WithLogger(slog.New(logs)))
			if st := statusOf(p, "srv"); st.State != StateReady {
				t.Fatalf("status = %+v, want ready", st)
			}
			left := attr(logs.next(t, "MCP tool definitions left out", 10*time.Second), "err").String()
			for _, name := range tc.bad {
				if !strings.Contains(left, strconv.Quote(name)) {
					t.Errorf("left out: %s; %q not named", left, name)
				}
				if strings.HasPrefix(name, "bad_") && p.Registry().Has(name) {
					t.Errorf("%s is listed", name)
				}
			}
			if !p.Registry().Has("no_schema") && tc.name == "stdio" {
				t.Errorf("a tool without an inputSchema is left out: %v", p.Registry().Names())
			}
			// The good definition of echo is the one kept, and it answers.
			echo, ok := p.Registry().Get("echo")
			if !ok || !strings.Contains(string(echo.InputSchema), `"text"`) {
				t.Fatalf("echo = %+v, %v", echo, ok)
			}
			v := newTestView(t, p, nil, nil, nil)
			if res := call(t, v, "echo", map[string]any{"text": "still here"}); res.Text != "still here" {
				t.Errorf("echo = %q", res.Text)
			}
		})
	}
}

// TestHungResourceListing: every job lists the resources of its servers
// before its first model request (the loop's resource bridge). A server that
// announces resources and never answers resources/list, while it answers
// pings (so it is never replaced), held every job that included it until
// the job's timeout, also jobs that used only other servers. One server's
// listing is bounded by the connect timeout, and loses only its resources.
func TestHungResourceListing(t *testing.T) {
	t.Parallel()
	s := DefaultSettings()
	s.ConnectTimeout, s.HealthInterval = 10*time.Second, 0
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"hung": hostileServer("hangresources", nil)}}, WithSettings(s),
		WithInProcessServer("good", newTestMCPServer("good"), ServerConfig{}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // far beyond the bound
	defer cancel()
	type listing struct {
		rs  []Resource
		err error
	}
	list := func(servers []string) <-chan listing {
		v := newTestView(t, p, servers, nil, nil)
		ch := make(chan listing, 1)
		go func() {
			rs, err := v.ListResources(ctx)
			ch <- listing{rs, err}
		}()
		return ch
	}
	all, hung := list(nil), list([]string{"hung"})
	if l := <-all; l.err != nil || len(l.rs) != 2 || l.rs[0].Server != "good" || ctx.Err() != nil {
		t.Errorf("every server: %+v, %v (caller's context: %v); want good's two resources", l.rs, l.err, ctx.Err())
	}
	if l := <-hung; !errors.Is(l.err, context.DeadlineExceeded) || !strings.Contains(l.err.Error(), `"hung"`) || ctx.Err() != nil {
		t.Errorf("the hung server alone: %v (caller's context: %v); want its listing's own deadline", l.err, ctx.Err())
	}
	v := newTestView(t, p, nil, nil, nil)
	if res := call(t, v, "hung__echo", map[string]any{"text": "tools still answer"}); res.Text != "tools still answer" {
		t.Errorf("hung__echo = %q", res.Text)
	}
}

// attrRecords is logRecords keeping the attributes loggers were made With.
type attrRecords struct {
	logRecords
	attrs []slog.Attr
}

func (a attrRecords) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(a.attrs...)
	return a.logRecords.Handle(ctx, r)
}
func (a attrRecords) WithAttrs(as []slog.Attr) slog.Handler {
	return attrRecords{a.logRecords, append(append([]slog.Attr(nil), a.attrs...), as...)}
}
func (a attrRecords) WithGroup(string) slog.Handler { return a }

// TestTransportLogsNameTheServer: mcp-go's streamable HTTP transport logs
// an error for each request a server sends that the pool declines
// (sampling/createMessage here); those lines did not say which server.
func TestTransportLogsNameTheServer(t *testing.T) {
	t.Parallel()
	s := newTestMCPServer("asks")
	s.AddTool(mcp.NewTool("sample"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		//nolint:staticcheck // deprecated in the newest protocol, still sent by servers of the older ones
		_, err := s.RequestSampling(ctx, mcp.CreateMessageRequest{CreateMessageParams: mcp.CreateMessageParams{
			Messages: []mcp.SamplingMessage{{Role: mcp.RoleUser, Content: mcp.NewTextContent("hi")}}, MaxTokens: 5}})
		return mcp.NewToolResultText(fmt.Sprint("declined: ", err)), nil
	})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(s, server.WithStateful(true)))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	logs := make(logRecords, 1000)
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{"asks": {URL: ts.URL + "/mcp"}}}, WithLogger(slog.New(attrRecords{logRecords: logs})))
	v := newTestView(t, p, nil, nil, nil)
	if res := call(t, v, "sample", nil); !strings.Contains(res.Text, "declined") {
		t.Fatalf("sample = %q", res.Text)
	}
	if r := logs.next(t, "error handling request", 10*time.Second); attr(r, "mcp_server").String() != "asks" {
		t.Errorf("the transport's log line names server %q", attr(r, "mcp_server"))
	}
}
