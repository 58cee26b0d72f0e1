package toolcache

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A legacy SSE server whose stream broke before its endpoint event (a
// line over the 64 MiB bound, a stream that ended, a 200 that is not an
// event stream) was reported only when the connect timeout ran out, as
// "timeout waiting for endpoint": mcp-go's stream reader has no one to
// tell before Start returns. The connect now fails as soon as the stream
// breaks, with the stream's error.
func TestSSEStreamBrokenBeforeEndpoint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		serve func(w http.ResponseWriter, r *http.Request)
		want  string
	}{
		{"a line over the bound", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: endpoint\ndata: ")
			chunk := bytes.Repeat([]byte("a"), 1<<20)
			for range maxMessageBytes>>20 + 2 {
				if _, err := w.Write(chunk); err != nil {
					return // the client hung up
				}
			}
			<-r.Context().Done()
		}, "message larger than 64 MiB"},
		{"the stream ends", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, ": bye\n\n")
		}, "the server ended it (EOF)"},
		{"not an event stream", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html><body>Sign in</body></html>\n")
		}, `Content-Type "text/html"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := httptest.NewServer(http.HandlerFunc(tc.serve))
			t.Cleanup(func() {
				ts.CloseClientConnections()
				ts.Close()
			})
			const connectTimeout = 45 * time.Second // far above the time to send 64 MiB under -race
			p := newTestPool(t, Config{Servers: map[string]ServerConfig{"legacy": {URL: ts.URL + "/sse", Type: TypeSSE}}},
				WithConnectTimeout(connectTimeout), WithBackoff(time.Hour, time.Hour), WithLogger(discardLogger()))
			st := statusOf(p, "legacy")
			if st.State != StateFailed {
				t.Fatalf("state %s, want failed: %+v", st.State, st)
			}
			for _, want := range []string{"the SSE stream broke before its endpoint event", tc.want} {
				if !strings.Contains(st.Error, want) {
					t.Errorf("error %q does not say %q", st.Error, want)
				}
			}
			if strings.Contains(st.Error, "timeout") {
				t.Errorf("error %q: reported at the connect timeout", st.Error)
			}
		})
	}
}
