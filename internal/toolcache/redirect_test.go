package toolcache

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// An HTTP server whose url redirects (a proxy sending http:// to https://,
// a path moved): a 307 or 308 keeps the POST and is followed; a 301, 302
// or 303 made each POST a GET without its body, which mcp-go's server
// answered with its event stream, so the handshake waited in silence for
// the connect timeout ("context deadline exceeded"). Such a redirect now
// fails the connect at once, saying where it leads.
func TestRedirectChangingTheMethodNamed(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle("/mcp/", server.NewStreamableHTTPServer(newTestMCPServer("moved"), server.WithStateful(true)))
	for _, code := range []int{301, 302, 303, 307, 308} {
		mux.HandleFunc("/r"+strconv.Itoa(code), func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/mcp/", code)
		})
	}
	ts := httptest.NewServer(mux)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	servers := map[string]ServerConfig{}
	for _, code := range []int{301, 302, 303, 307, 308} {
		servers["r"+strconv.Itoa(code)] = ServerConfig{Type: TypeHTTP, URL: ts.URL + "/r" + strconv.Itoa(code)}
	}
	s := DefaultSettings()
	s.ConnectTimeout, s.HealthInterval, s.BackoffInitial, s.BackoffMax = 10*time.Second, 0, time.Hour, time.Hour
	p := newTestPool(t, Config{Servers: servers}, WithSettings(s))
	for _, st := range p.Status() {
		code, _ := strconv.Atoi(strings.TrimPrefix(st.Name, "r"))
		if code == 307 || code == 308 {
			if st.State != StateReady {
				t.Errorf("%s: %s %q, want ready", st.Name, st.State, st.Error)
			}
			continue
		}
		want := "the server redirected the POST with " + strconv.Itoa(code) + " to " + ts.URL + "/mcp/"
		if st.State != StateFailed || !strings.Contains(st.Error, want) || strings.Contains(st.Error, "deadline") {
			t.Errorf("%s: %s %q, want failed at once with %q", st.Name, st.State, st.Error, want)
		}
	}
	v := newTestView(t, p, []string{"r307", "r308"}, nil, nil)
	for _, name := range []string{"r307__echo", "r308__echo"} {
		if got := call(t, v, name, map[string]string{"text": "hi"}).Text; got != "hi" {
			t.Errorf("%s = %q", name, got)
		}
	}
}
