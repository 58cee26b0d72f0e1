package toolcache

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A Streamable HTTP server refusing the initialize POST: mcp-go said
// "authorization required" for a 401, and for every other 4xx "likely a
// legacy SSE server", which sent an operator whose token was refused
// (403) or who missed a header the server names (400) to change the
// transport. The error says the status and what the server wrote; a 401
// or 403 points at the credentials, another 4xx keeps the legacy hint.
func TestHandshakeRefusalSaysWhy(t *testing.T) {
	t.Parallel()
	refuse := func(code int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
			}
			http.Error(w, body, code)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/401", refuse(401, "invalid_token: expired"))
	mux.Handle("/403", refuse(403, "forbidden:\n  this key may not use MCP"))
	mux.Handle("/400", refuse(400, "missing header X-Api-Key"))
	mux.Handle("/404", refuse(404, "404 page not found"))
	mux.Handle("/long", refuse(403, strings.Repeat("é", 1000)))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	s := DefaultSettings()
	s.HealthInterval, s.BackoffInitial, s.BackoffMax = 0, time.Hour, time.Hour
	servers := map[string]ServerConfig{}
	for _, path := range []string{"401", "403", "400", "404", "long"} {
		servers["s"+path] = ServerConfig{Type: TypeHTTP, URL: ts.URL + "/" + path}
	}
	p := newTestPool(t, Config{Servers: servers}, WithSettings(s))
	const legacy = `likely a legacy SSE server`
	want := map[string][]string{
		"s401":  {`the server asks for credentials (401 Unauthorized: "invalid_token: expired"): set them in "headers" for server "s401"`},
		"s403":  {`the server refused it (403 Forbidden: "forbidden: this key may not use MCP"): check the credentials set for server "s403"`},
		"s400":  {legacy + ` (the server answered 400 Bad Request: "missing header X-Api-Key"): if it is one (its url often ends in /sse), set "type": "sse" for server "s400"`},
		"s404":  {legacy + ` (the server answered 404 Not Found: "404 page not found"): if it is one`},
		"slong": {`(403 Forbidden: "` + strings.Repeat("é", 100) + `...")`},
	}
	for _, st := range p.Status() {
		if st.State != StateFailed {
			t.Errorf("%s: %s", st.Name, st.State)
		}
		for _, w := range want[st.Name] {
			if !strings.Contains(st.Error, w) {
				t.Errorf("%s: %q\nwant it to contain %q", st.Name, st.Error, w)
			}
		}
		if (st.Name == "s401" || st.Name == "s403") && strings.Contains(st.Error, "legacy") {
			t.Errorf("%s: %q: a refused credential is no legacy server", st.Name, st.Error)
		}
	}
}

// A legacy SSE server refusing its stream said only "authorization
// required" or "unexpected status code: 403": the error now quotes what
// the server answered, and a 401 or 403 points at the credentials.
func TestSSERefusalSaysWhy(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/401", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "token expired", http.StatusUnauthorized) })
	mux.HandleFunc("/403", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "key revoked", http.StatusForbidden) })
	mux.HandleFunc("/404", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no route /404", 404) })
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	s := DefaultSettings()
	s.HealthInterval, s.BackoffInitial, s.BackoffMax = 0, time.Hour, time.Hour
	servers := map[string]ServerConfig{}
	for _, path := range []string{"401", "403", "404"} {
		servers["s"+path] = ServerConfig{Type: TypeSSE, URL: ts.URL + "/" + path}
	}
	p := newTestPool(t, Config{Servers: servers}, WithSettings(s))
	want := map[string]string{
		"s401": `(the server answered 401 Unauthorized: "token expired"): check the credentials set for server "s401"`,
		"s403": `(the server answered 403 Forbidden: "key revoked"): check the credentials set for server "s403"`,
		"s404": `(the server answered 404 Not Found: "no route /404")`,
	}
	for _, st := range p.Status() {
		if st.State != StateFailed || !strings.Contains(st.Error, want[st.Name]) {
			t.Errorf("%s: %s %q\nwant it to contain %q", st.Name, st.State, st.Error, want[st.Name])
		}
	}
}
