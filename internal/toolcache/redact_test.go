package toolcache

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// A server URL's userinfo (user:password@ or a token@, often expanded from
// ${VAR}) is in no status, call error or config error: the status is
// logged and printed by worker tools, and a call's error is shown to the
// model and stored in the job's events and transcript.
func TestURLCredentialsStayOutOfErrors(t *testing.T) {
	t.Parallel()
	dead := httptest.NewServer(http.NotFoundHandler())
	addr := dead.Listener.Addr().String()
	dead.Close() // connections to addr are refused
	for _, typ := range []string{TypeHTTP, TypeSSE} {
		for _, mode := range []string{SessionShared, SessionPerJob} {
			for _, userinfo := range []string{"user:pw-s3cret", "tok3n-s3cret"} {
				t.Run(typ+"/"+mode+"/"+userinfo, func(t *testing.T) {
					t.Parallel()
					sc := ServerConfig{URL: "http://" + userinfo + "@" + addr + "/mcp", Type: typ, SessionMode: mode}
					p := newTestPool(t, Config{Servers: map[string]ServerConfig{"srv": sc}}, WithBackoff(time.Hour, time.Hour))
					var seen []string
					for _, st := range p.Status() {
						seen = append(seen, "status: "+st.Error)
					}
					v := newTestView(t, p, nil, nil, nil)
					_, err := v.ListResources(context.Background())
					if err == nil {
						t.Fatal("ListResources on a dead server: no error")
					}
					seen = append(seen, "call: "+err.Error())
					for _, s := range seen {
						if strings.Contains(s, "s3cret") {
							t.Errorf("%s", s)
						}
					}
					if mode == SessionShared && !strings.Contains(seen[0], addr) {
						t.Errorf("the status does not say where it failed: %s", seen[0])
					}
				})
			}
		}
	}
	for _, bad := range []string{"http://u:${PW}@host:x/mcp", "u:${PW}@host/mcp"} { // no port; no scheme
		_, err := ParseConfigWithEnv([]byte(`{"mcpServers": {"x": {"url": "`+bad+`"}}}`),
			func(string) (string, bool) { return "pw-s3cret", true })
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("config error %v: want one without the password", err)
		}
	}
}

// Userinfo taken out of the URL still authenticates, on every request
// (the SSE transport posts to the endpoint the server names, which carried
// no userinfo before).
func TestURLCredentialsAuthenticate(t *testing.T) {
	t.Parallel()
	guard := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != "user" || p != "pw" {
				http.Error(rw, "unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(rw, r)
		})
	}
	mcpURL := func(ts *httptest.Server, path string) string {
		return strings.Replace(ts.URL, "http://", "http://user:pw@", 1) + path
	}
	httpSrv := httptest.NewServer(guard(server.NewStreamableHTTPServer(watchedTestMCPServer("http", nil), server.WithStateful(true))))
	sse := server.NewSSEServer(watchedTestMCPServer("sse", nil))
	sseSrv := httptest.NewServer(guard(sse))
	server.WithBaseURL(sseSrv.URL)(sse)
	for _, ts := range []*httptest.Server{httpSrv, sseSrv} {
		t.Cleanup(func() {
			ts.CloseClientConnections()
			ts.Close()
		})
	}
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{
		"h": {URL: mcpURL(httpSrv, "/mcp")},
		"s": {URL: mcpURL(sseSrv, "/sse"), Type: TypeSSE},
	}})
	for _, st := range p.Status() {
		if st.State != StateReady {
			t.Errorf("%s: %+v", st.Name, st)
		}
	}
	v := newTestView(t, p, nil, nil, nil)
	echoes := 0
	for _, tool := range p.Registry().List() {
		if tool.Original == "echo" {
			echoes++
			if got := call(t, v, tool.Name, map[string]any{"text": "hi"}).Text; got != "hi" {
				t.Errorf("%s = %q", tool.Name, got)
			}
		}
	}
	if echoes != 2 {
		t.Errorf("%d echo tools, want one of each server", echoes)
	}
}
