package toolcache

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/journal"
	"github.com/jetagent/jetagent/internal/redact"
)

// legacyProtocol reports whether v is a protocol version negotiated with the
// initialize handshake (everything before 2026-07-28).
func legacyProtocol(v string) bool {
	return mcp.IsValidProtocolVersion(v) && !mcp.IsModernProtocol(v)
}

// modernProtocol reports whether v is a sessionless protocol version
// (2026-07-28 or later) that mcp-go implements.
func modernProtocol(v string) bool {
	return mcp.IsValidProtocolVersion(v) && mcp.IsModernProtocol(v)
}

// session is one connected MCP client: a child process, an HTTP/SSE session
// or an in-process server. Requests go through mcp-go's client.Client; the
// transport under it is wrapped by tapTransport (session_raw.go).
type session struct {
	server string
	cfg    ServerConfig
	c      *client.Client
	// sem bounds the calls in flight (MaxConcurrent).
	sem chan struct{}

	dead     chan struct{} // closed once the session is known broken or closed
	deadOnce sync.Once
	deadErr  error // set before dead is closed
	// onDead is set by the owner after dial, while the child may already be
	// exiting (markDead runs on the stderr watcher): hence atomic.
	onDead atomic.Pointer[func(*session)]

	// secrets are the dialer's, for stderrHint and strayHint.
	secrets []string
	proc    *stdioProc    // a stdio server's process
	stderr  *tailBuffer   // a child's stderr, complete once exited is closed
	exited  chan struct{} // closed when a child's stderr reaches EOF (it exited)
	pid     int
	// ending: the pool itself is ending the child (close, a failed
	// handshake), so how it ended is no news (see exitHint).
	ending atomic.Bool
	ctx    context.Context    // the process/session context, ended by close
	cancel context.CancelFunc // ends ctx (last resort kill)
	http   *http.Client       // an HTTP or SSE session's own client
	// tooLarge: a response of http (or a line of a stdio server) was cut
	// off at maxMessageBytes.
	tooLarge atomic.Bool
	wg       sync.WaitGroup // the stderr watcher, the listen loop, cancellations

	// sseBroke is the error of an SSE session's stream that broke before
	// mcp-go's connection-lost callback was set (sseLostWatched): see
	// sseStreamWatch.
	sseBroke       atomic.Pointer[error]
	sseLostWatched atomic.Bool

	// refusal is the last POST an HTTP server answered with an error
	// status (see refusalWatch).
	refusal atomic.Pointer[httpRefusal]

	// slotHook runs when a call starts waiting for a free slot (tests).
	slotHook func(server string)

	// progress routes notifications/progress to the calls that asked.
	progress progressRoutes

	// modern: the session speaks 2026-07-28 (no handshake, no session).
	modern    atomic.Bool
	lastHeard atomic.Int64 // UnixNano of the last response or notification

	protocol    string
	info        mcp.Implementation
	caps        mcp.ServerCapabilities
	connectTime time.Duration

	closeOnce sync.Once
	closeErr  error
	bgMu      sync.Mutex // guards closing against new background work
	closing   bool
}

// dialer opens sessions; it holds what every connection needs.
type dialer struct {
	// logger receives the transports' own logs; only warnings and errors,
	// since mcp-go logs routine events (such as each listening stream) at Info.
	logger         *slog.Logger
	clientInfo     mcp.Implementation
	connectTimeout time.Duration
	notify         func(server string, s *session, n mcp.JSONRPCNotification)
	// secrets are the pool's errorSecrets, masked in the stderr and
	// stdout a session quotes before it is cut (see stderrHint).
	secrets []string
	// slotHook is each session's slotHook (tests).
	slotHook func(server string)
}

// timedOut says of err, when the handshake's ctx has run out, that it was
// the connect timeout: mcp-go may report a request its context ended as
// "unexpected nil response" or a closed transport, and when it does say
// "context deadline exceeded" it does not say whose limit that was (a
// server that never answers initialize was only "initialize: transport
// error: context deadline exceeded").
func (d *dialer) timedOut(ctx context.Context, err error) error {
	cerr := ctx.Err()
	switch {
	case err == nil || !errors.Is(cerr, context.DeadlineExceeded):
		return err
	case errors.Is(err, cerr):
		return fmt.Errorf("%w (no answer within the connect timeout %s)", err, d.connectTimeout)
	}
	return fmt.Errorf("%w (no answer within the connect timeout %s: %w)", err, d.connectTimeout, cerr)
}

// dial connects to a server and performs the handshake (on 2026-07-28, the
// server/discover request that replaces it). ctx bounds the handshake only;
// the session lives until close.
func (d *dialer) dial(ctx context.Context, name string, cfg ServerConfig, inproc *server.MCPServer) (*session, error) {
	start := time.Now()
	if d.connectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.connectTimeout)
		defer cancel()
	}
	procCtx, cancel := context.WithCancel(context.Background())
	s := &session{
		server:   name,
		cfg:      cfg,
		secrets:  d.secrets,
		slotHook: d.slotHook,
		sem:      make(chan struct{}, cfg.maxConcurrent()),
		dead:     make(chan struct{}),
		exited:   make(chan struct{}),
		ctx:      procCtx,
		cancel:   cancel,
	}
	// mcp-go's transports log without saying which server (an error for
	// each request a server sends that the pool declines, a lost stream).
	log := d.logger.With("mcp_server", name)
	var tr transport.Interface
	switch cfg.Type {
	case TypeStdio:
		// Started here, not by mcp-go: see stdio_proc.go.
		stdio, proc, err := startStdio(procCtx, cfg, log, &s.tooLarge, func() {
			s.markDead(fmt.Errorf("the server wrote a line (one message) over %d MiB that did not end within %d MiB more", maxMessageBytes>>20, maxSkippedBytes>>20))
		})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("start %q: %w", cfg.Command, err)
		}
		s.proc = proc
		s.pid = proc.cmd.Process.Pid
		s.stderr = &tailBuffer{max: 4096}
		// The child's stderr reaches EOF when it exits: that is how a crash
		// is noticed even when no request is in flight. Once exited is
		// closed, s.stderr holds all there was.
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			_, _ = io.Copy(s.stderr, proc.stderr)
			close(s.exited)
			s.markDead(errors.New("server process exited"))
		}()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.watchOrphanedPipes()
		}()
		tr = stdio
	case TypeHTTP:
		// Each session has its own connection pool: see newHTTPClient.
		s.http = newHTTPClient(&s.tooLarge)
		opts := []transport.StreamableHTTPCOption{transport.WithHTTPBasicClient(s.http), transport.WithHTTPLogger(log)}
		if !modernProtocol(cfg.Protocol) {
			// On 2025-11-25, notifications/tools/list_changed sent while no
			// request is in flight arrive only on the GET stream (and the
			// conformance suite checks a client listens there). mcp-go
			// deprecates the option because 2026-07-28 removed that stream;
			// a sessionless session listens with subscriptions/listen instead.
			opts = append(opts, transport.WithContinuousListening()) //nolint:staticcheck // the GET stream is how 2025-11-25 delivers list_changed; see above
		}
		target, headers := splitUserinfo(cfg.URL, cfg.Headers) // kept out of errors: see splitUserinfo
		if len(headers) > 0 {
			opts = append(opts, transport.WithHTTPHeaders(headers))
		}
		s.http.Transport = nestStreams{refusalWatch{s.http.Transport, s}, log}
		t, err := transport.NewStreamableHTTP(target, opts...)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("url: %w", urlError(cfg.URL, err))
		}
		tr = t
	case TypeSSE:
		s.http = newHTTPClient(&s.tooLarge)
		s.http.Transport = sseStreamWatch{refusalWatch{s.http.Transport, s}, s, log}
		opts := []transport.ClientOption{transport.WithHTTPClient(s.http), transport.WithSSELogger(log),
			transport.WithResponseTimeout(sseResponseTimeout)}
		if d.connectTimeout > 0 {
			// Start waits for the endpoint event on the session's own
			// context, not ctx: without this, mcp-go's 30 s, whatever the
			// connect timeout.
			opts = append(opts, transport.WithEndpointTimeout(d.connectTimeout))
		}
		target, headers := splitUserinfo(cfg.URL, cfg.Headers) // kept out of errors: see splitUserinfo
		if len(headers) > 0 {
			opts = append(opts, transport.WithHeaders(headers))
		}
		t, err := transport.NewSSE(target, opts...)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("url: %w", urlError(cfg.URL, err))
		}
		tr = t
	case TypeInProcess:
		if inproc == nil {
			cancel()
			return nil, fmt.Errorf("in-process server %q has no server", name)
		}
		tr = transport.NewInProcessTransport(inproc)
	default:
		cancel()
		return nil, fmt.Errorf("unknown transport %q", cfg.Type)
	}
	version := protocolFor(cfg)
	copts := []client.ClientOption{client.WithProtocolVersion(version)}
	if modernProtocol(version) {
		// The operator asked for 2026-07-28: wait for server/discover as long
		// as the connect timeout allows, not mcp-go's 5 s probe bound.
		copts = append(copts, client.WithDiscoverTimeout(-1))
	}
	s.c = client.NewClient(newTap(tr, s), copts...)
	// Start runs on the session's own context, which outlives the
	// handshake (an SSE stream, a child process), so ctx did not bound it:
	// an SSE server that never sends its response headers held Start, and
	// the pool's run loop with it, for ever (net/http waits for headers
	// without a limit). ctx ending now cancels the session's context.
	stopStart := context.AfterFunc(ctx, cancel)
	err := s.c.Start(procCtx)
	if !stopStart() && err == nil {
		err = ctx.Err() // it ended just after Start, and took the session's context
	}
	if broke := s.sseBroke.Load(); broke != nil && err != nil {
		// The stream's own error, not the "context canceled" of the
		// Start that sseStreamWatch ended for it.
		err = *broke
	}
	err = d.timedOut(ctx, err)
	if err != nil {
		err = s.withTooLarge(err)
		_ = s.close()
		if cfg.Type == TypeStdio {
			return nil, fmt.Errorf("start %q: %w", cfg.Command, err)
		}
		if cfg.Type == TypeSSE {
			err = refusedStream(err, s.refusal.Load(), name)
		}
		return nil, fmt.Errorf("connect %s: %w", redact.URL(cfg.URL), err) // errors reach the model
	}
	// An SSE stream that ends takes the session with it; mcp-go reports that
	// here (its in-flight requests fail only with untyped errors).
	s.c.OnConnectionLost(func(err error) { s.markDead(fmt.Errorf("SSE stream lost: %w", err)) })
	if cfg.Type == TypeSSE {
		s.sseLostWatched.Store(true) // from now on mcp-go reports a broken stream
		if broke := s.sseBroke.Load(); broke != nil {
			// It broke after the endpoint event but before the callback
			// was set: no one else heard of it.
			_ = s.close()
			return nil, fmt.Errorf("connect %s: %w", redact.URL(cfg.URL), s.withTooLarge(*broke))
		}
	}
	s.c.OnNotification(func(n mcp.JSONRPCNotification) {
		if d.notify != nil {
			d.notify(name, s, n)
		}
	})
	res, err := s.c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: version,
		ClientInfo:      d.clientInfo,
	}})
	if err == nil && modernProtocol(version) && !mcp.IsModernProtocol(res.ProtocolVersion) {
		// mcp-go falls back to initialize when server/discover fails.
		err = fmt.Errorf("the server does not speak protocol %s (it answered the initialize handshake at %s)", version, res.ProtocolVersion)
	}
	err = d.timedOut(ctx, err)
	if err != nil {
		err = s.withTooLarge(err)
		// A server that fails the handshake usually says why on stderr.
		s.awaitStderr(transportBroken(err, false))
		exit := s.exitHint(exitHintWait)
		if exit != "" {
			s.awaitStdout()
		}
		_ = s.close()
		what := "initialize"
		if modernProtocol(version) {
			what = "connect at protocol " + version
		}
		if cfg.Type == TypeHTTP && !modernProtocol(version) {
			err = refusedHandshake(err, s.refusal.Load(), name)
		}
		return nil, fmt.Errorf("%s: %w%s%s%s", what, err, exit, s.stderrHint(), s.strayHint())
	}
	s.modern.Store(mcp.IsModernProtocol(res.ProtocolVersion))
	s.protocol = res.ProtocolVersion
	s.info = res.ServerInfo
	s.caps = res.Capabilities
	s.connectTime = time.Since(start)
	if s.modern.Load() && s.caps.Tools != nil && s.caps.Tools.ListChanged {
		s.listen(log)
	}
	return s, nil
}

// listen keeps a subscriptions/listen stream open on a 2026-07-28 session,
// which is where such a server sends notifications/tools/list_changed. A
// stream that ends while the session lives is reopened after a second.
func (s *session) listen(log *slog.Logger) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			err := s.c.Listen(s.ctx, mcp.SubscriptionFilter{ToolsListChanged: true})
			if s.ctx.Err() != nil || s.isDead() {
				return
			}
			log.Warn("MCP subscriptions/listen stream ended; reopening", "err", err)
			select {
			case <-time.After(time.Second):
			case <-s.ctx.Done():
				return
			case <-s.dead:
				return
			}
		}
	}()
}

// newHTTPClient is a client with a connection pool of its own. mcp-go's
// default client uses http.DefaultTransport, which anything in the process
// may CloseIdleConnections on (httptest.Server.Close does): a request that is
// just taking an idle connection then fails ("CloseIdleConnections called"),
// which here fails a handshake or a call.
//
// Its responses are bounded (see boundedTransport), and it follows no
// redirect that changes the request's method (see sameMethodRedirects).
func newHTTPClient(tooLarge *atomic.Bool) *http.Client {
	return &http.Client{
		Transport:     retryAfterTransport{boundedTransport{http.DefaultTransport.(*http.Transport).Clone(), tooLarge}},
		CheckRedirect: sameMethodRedirects,
	}
}

// sameMethodRedirects is net/http's redirect policy (at most 10), except
// that a redirect turning a request into another method fails it: a 301,
// 302 or 303 (an http:// URL a proxy sends to https://, a moved path) makes
// a POST a GET without its body, so the server got a GET for every
// JSON-RPC message. mcp-go's server answers such a GET with its event
// stream, and the handshake waited in silence for the connect timeout; a
// 307 or 308 keeps the POST and is followed.
func sameMethodRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if prev := via[len(via)-1]; prev.Method != req.Method {
		status := 0
		if req.Response != nil {
			status = req.Response.StatusCode
		}
		return fmt.Errorf("the server redirected the %s with %d to %s, which would send it again as a %s without its body: set the server's url to where it redirects",
			prev.Method, status, redact.URL(req.URL.String()), req.Method)
	}
	return nil
}

// Bounds on honouring a server's Retry-After (see retryAfterTransport).
const (
	// maxRetryAfter is the longest Retry-After waited for.
	maxRetryAfter = 30 * time.Second
	// retryAfterAttempts bounds the requests sent for one (the first and
	// its resends).
	retryAfterAttempts = 3
)

// retryAfterTransport resends a request the server refused with 503
// (Service Unavailable) or 429 (Too Many Requests) and a Retry-After, once
// that time has passed: both say the request was not processed, and mcp-go
// gives such a refusal to the model as the call's failure at once. It
// waits only while the request's context (a call's callTimeout) leaves
// room and for at most maxRetryAfter, and sends a request at most
// retryAfterAttempts times. A refusal it does not wait for keeps its
// error, with what the server asked ("the server asked to retry after
// 2m0s") added to the body mcp-go quotes.
type retryAfterTransport struct{ base http.RoundTripper }

func (t retryAfterTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		resp, err := t.base.RoundTrip(r)
		if err != nil || (resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusTooManyRequests) {
			return resp, err
		}
		d, ok := retryAfter(resp.Header.Get("Retry-After"), time.Now())
		if !ok {
			return resp, nil
		}
		why := ""
		deadline, hasDeadline := r.Context().Deadline()
		switch {
		case attempt >= retryAfterAttempts:
			why = fmt.Sprintf("sent %d times", attempt)
		case d > maxRetryAfter:
			why = fmt.Sprintf("longer than the %s waited for", maxRetryAfter)
		case hasDeadline && time.Until(deadline) <= d:
			why = "beyond the call's deadline"
		case r.Body != nil && r.Body != http.NoBody && r.GetBody == nil:
			why = "the request cannot be sent again"
		}
		if why != "" {
			msg, _ := io.ReadAll(resp.Body) // bounded: an error body
			_ = resp.Body.Close()
			msg = fmt.Appendf(bytes.TrimSpace(msg), " (the server asked to retry after %s; not retried: %s)", d, why)
			resp.Body = io.NopCloser(bytes.NewReader(msg))
			resp.ContentLength = int64(len(msg))
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body) // bounded: an error body
		_ = resp.Body.Close()
		timer := time.NewTimer(d)
		select {
		case <-r.Context().Done():
			timer.Stop()
			return nil, r.Context().Err()
		case <-timer.C:
		}
		next := r.Clone(r.Context())
		if r.GetBody != nil {
			body, err := r.GetBody()
			if err != nil {
				return nil, err
			}
			next.Body = body
		}
		r = next
	}
}

// retryAfter reads a Retry-After value: seconds, or an HTTP date (a date
// already past is 0).
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(24*time.Hour/time.Second) {
			secs = int64(24 * time.Hour / time.Second)
		}
		return time.Duration(secs) * time.Second, true
	}
	when, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(when.Sub(now), 0).Round(time.Second), true
}

// Bounds on what an HTTP server can make the pool hold in memory: mcp-go
// reads JSON bodies with io.ReadAll or a json.Decoder and SSE streams line by
// line with bufio, none of them bounded, so a response that never ends
// would grow until the request's deadline (a call may have none).
const (
	// maxMessageBytes bounds one JSON body, and one line of an event
	// stream (one message). Far above any sane tools/list or result.
	maxMessageBytes = 64 << 20
	// maxErrorBodyBytes is how much of a failed request's body mcp-go gets
	// to put into its error ("request failed with status 500: <body>").
	maxErrorBodyBytes = 2 << 10
)

// errMessageTooLarge is what a read beyond maxMessageBytes fails with.
var errMessageTooLarge = fmt.Errorf("message larger than %d MiB", maxMessageBytes>>20)

// boundedTransport limits response bodies: an error response to its first
// maxErrorBodyBytes, a JSON body to maxMessageBytes, an event stream to
// maxMessageBytes between two newlines (the stream itself may last forever).
// A body cut off sets tooLarge: mcp-go does not always pass the read's
// error on (an SSE stream cut off fails with "unexpected nil response").
type boundedTransport struct {
	base     http.RoundTripper
	tooLarge *atomic.Bool
}

func (t boundedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	switch {
	case resp.StatusCode >= 300:
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: maxErrorBodyBytes, eof: true}
	case strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream"):
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: maxMessageBytes, perLine: true, tooLarge: t.tooLarge}
	default:
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: maxMessageBytes, tooLarge: t.tooLarge}
	}
	return resp, nil
}

// sseStreamWatch watches the event stream of a legacy SSE session (its
// GET) while it connects. mcp-go's Start waits for the endpoint event
// until its timeout, and its stream reader tells of a broken stream only
// through the connection-lost callback, which is set once Start has
// returned: a line over maxMessageBytes, a stream that ended, or a 200
// page that is not an event stream failed the connect only at the connect
// timeout, as "timeout waiting for endpoint". The first read error of the
// stream before the callback is set is kept in the session's sseBroke and
// ends the session's context, which ends Start at once.
//
// Every answer of the session comes on that stream, so a line over
// maxMessageBytes, or nested deeper than maxJSONNesting, is dropped to its
// end as a stdio server's is (lineBound, nestBound): its request fails,
// the session goes on.
type sseStreamWatch struct {
	base http.RoundTripper
	s    *session
	log  *slog.Logger
}

func (t sseStreamWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil || r.Method != http.MethodGet || resp.StatusCode != http.StatusOK || resp.Body == nil {
		return resp, err
	}
	body := resp.Body
	if lb, ok := body.(*limitedBody); ok && lb.perLine {
		// Until the handshake is done, a line over the bound fails the
		// connect at once (sseStreamBroke) rather than being dropped.
		body = &nestBound{r: &lineBound{b: lb, log: t.log, sse: true, skipOK: t.s.sseLostWatched.Load}, log: t.log, sse: true}
	}
	resp.Body = &sseStreamBody{ReadCloser: body, s: t.s, contentType: resp.Header.Get("Content-Type")}
	return resp, nil
}

// nestStreams reads the event streams of a Streamable HTTP session (the
// answers to its requests, its GET stream) through nestBound: mcp-go drops
// an event it cannot decode, and the request it answered failed with
// "unexpected nil response" once the stream ended (or waited for its
// deadline while it went on).
type nestStreams struct {
	base http.RoundTripper
	log  *slog.Logger
}

func (t nestStreams) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Body == nil ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, err
	}
	resp.Body = &nestBound{r: resp.Body, log: t.log, sse: true}
	return resp, nil
}

// httpRefusal is an HTTP server's error answer to a POST: its status and
// the start of its body.
type httpRefusal struct {
	status int
	body   string
}

// maxRefusalBody is how much of a refusal's body an error quotes.
const maxRefusalBody = 200

// refusalWatch keeps an HTTP or SSE session's last refused request
// (status >= 400; a DELETE ending the session aside) in its refusal:
// mcp-go reports a refused initialize without its status or body, as
// "authorization required" (401) or, for every other 4xx, "likely a
// legacy SSE server" (refusedHandshake), and a refused SSE stream as
// "unexpected status code: 403" (refusedStream).
type refusalWatch struct {
	base http.RoundTripper
	s    *session
}

func (t refusalWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil || r.Method == http.MethodDelete || resp.StatusCode < 400 || resp.Body == nil {
		return resp, err
	}
	body, _ := io.ReadAll(resp.Body) // bounded: an error body (boundedTransport)
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	text := strings.ToValidUTF8(strings.Join(strings.Fields(string(body)), " "), "\uFFFD")
	if len(text) > maxRefusalBody {
		cut := maxRefusalBody
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		// A secret the cut goes through is masked by its part.
		text = redact.Window(text[:cut], t.s.secrets, false, true) + "..."
	}
	t.s.refusal.Store(&httpRefusal{status: resp.StatusCode, body: text})
	return resp, nil
}

// refusedHandshake says what a Streamable HTTP server's refusal of the
// initialize POST was (r, when one was seen), where mcp-go says only
// "authorization required" for a 401 and, for any other 4xx, that the
// server is likely a legacy SSE server: a 403 for a wrong token, or a
// 400 naming a missing header, read as a transport to change. A 401 or
// 403 is said to be about credentials; another 4xx keeps mcp-go's guess
// with the setting it means (its url often ends in /sse) and what the
// server said. Other errors are err.
func refusedHandshake(err error, r *httpRefusal, name string) error {
	legacy := errors.Is(err, transport.ErrLegacySSEServer)
	if !legacy && !errors.Is(err, transport.ErrAuthorizationRequired) {
		return err
	}
	said := ""
	if r != nil {
		said = fmt.Sprintf("%d %s", r.status, http.StatusText(r.status))
		if r.body != "" {
			said += fmt.Sprintf(": %q", r.body)
		}
	}
	switch {
	case !legacy || (r != nil && r.status == http.StatusUnauthorized):
		if said == "" {
			said = "401 Unauthorized"
		}
		return fmt.Errorf(`%w: the server asks for credentials (%s): set them in "headers" for server %q in the MCP servers file (such as "Authorization": "Bearer ${TOKEN}"), or check the ones set there`, err, said, name)
	case r != nil && r.status == http.StatusForbidden:
		return fmt.Errorf(`the server refused it (%s): check the credentials set for server %q in the MCP servers file (its "headers" or url)`, said, name)
	case said != "":
		said = " (the server answered " + said + ")"
	}
	// mcp-go's "likely a legacy SSE server" named no setting.
	return fmt.Errorf(`%w%s: if it is one (its url often ends in /sse), set "type": "sse" for server %q in the MCP servers file`, err, said, name)
}

// refusedStream adds to err, the failed start of a legacy SSE session (or
// a request refused for its credentials mid-session, see do), what the
// server answered when it refused the stream (r, when one was seen): mcp-go says "authorization required" or "unexpected status
// code: 403" without the server's words. A 401 or 403 points at the
// server's credentials.
func refusedStream(err error, r *httpRefusal, name string) error {
	if r == nil {
		return err
	}
	said := fmt.Sprintf("%d %s", r.status, http.StatusText(r.status))
	if r.body != "" {
		said += fmt.Sprintf(": %q", r.body)
	}
	if r.status == http.StatusUnauthorized || r.status == http.StatusForbidden {
		return fmt.Errorf(`%w (the server answered %s): check the credentials set for server %q in the MCP servers file (its "headers" or url)`, err, said, name)
	}
	return fmt.Errorf("%w (the server answered %s)", err, said)
}

type sseStreamBody struct {
	io.ReadCloser
	s           *session
	contentType string
}

func (b *sseStreamBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.s.sseStreamBroke(err, b.contentType)
	}
	return n, err
}

// sseStreamBroke records err as the reason the connect fails, unless
// mcp-go reports it already or the session's context ended first (the
// connect timeout, close): then the read error is only the consequence.
func (s *session) sseStreamBroke(err error, contentType string) {
	if s.sseLostWatched.Load() || s.ctx.Err() != nil {
		return
	}
	if errors.Is(err, io.EOF) {
		err = fmt.Errorf("the server ended it (%w)", err)
	}
	if !strings.HasPrefix(contentType, "text/event-stream") {
		err = fmt.Errorf("%w (the response is Content-Type %q, not an event stream: is the url the server's SSE endpoint?)", err, contentType)
	}
	err = fmt.Errorf("the SSE stream broke before its endpoint event: %w", err)
	if s.sseBroke.CompareAndSwap(nil, &err) {
		s.cancel()
	}
}

// withTooLarge adds to err that a response was cut off at maxMessageBytes,
// if one was since the last error that said so (mcp-go may have reported
// the cut with an error of its own, or none).
func (s *session) withTooLarge(err error) error {
	if s.tooLarge.CompareAndSwap(true, false) && !errors.Is(err, errMessageTooLarge) {
		return fmt.Errorf("%w (%w)", err, errMessageTooLarge)
	}
	return err
}

// limitedBody fails (or, with eof, ends) once left bytes have been read;
// with perLine, left starts again after each newline.
type limitedBody struct {
	io.ReadCloser
	left     int
	perLine  bool
	eof      bool
	tooLarge *atomic.Bool
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		if b.eof {
			return 0, io.EOF
		}
		b.tooLarge.Store(true)
		return 0, errMessageTooLarge
	}
	if len(p) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	if i := bytes.LastIndexByte(p[:n], '\n'); b.perLine && i >= 0 {
		b.left = maxMessageBytes - (n - 1 - i)
	} else {
		b.left -= n
	}
	return n, err
}

// protocolFor is the version the session asks for. Protocol (2026-07-28)
// selects the sessionless protocol. Otherwise the pool pins a pre-2026
// version, which makes mcp-go skip its server/discover probe: that costs a
// round trip on servers that reject it and 5 s on servers that ignore it,
// while every current server answers initialize at once.
func protocolFor(cfg ServerConfig) string {
	switch {
	case cfg.Protocol != "":
		return cfg.Protocol
	case cfg.ProtocolVersion != "":
		return cfg.ProtocolVersion
	}
	return mcp.LATEST_LEGACY_PROTOCOL_VERSION
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range sortedKeys(env) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// markDead records why the session broke and wakes whoever watches it. The
// owner's onDead runs first, so a caller that finds the session still
// published knows it was alive a moment ago.
func (s *session) markDead(err error) {
	s.deadOnce.Do(func() {
		s.deadErr = err
		if f := s.onDead.Load(); f != nil {
			(*f)(s)
		}
		close(s.dead)
	})
}

func (s *session) isDead() bool {
	select {
	case <-s.dead:
		return true
	default:
		return false
	}
}

// close ends the session: the transport is closed (stdin closed, then
// SIGTERM, then SIGKILL for a child process; a broken session's child is
// killed at once), the process group is killed so no grandchild survives,
// and the background goroutines are waited for.
func (s *session) close() error {
	s.closeOnce.Do(func() {
		if !s.isDead() {
			// Ending a live session: how the child then ends is ours. A
			// broken one's child most likely ended (or is ending) by
			// itself, which is what its calls' errors say.
			s.ending.Store(true)
		}
		s.markDead(ErrClosed)
		if s.pid > 0 && !errors.Is(s.deadErr, ErrClosed) {
			// A broken session gets no graceful stdin-close/SIGTERM grace
			// period (5 s for a hung server): reconnecting is waiting on it.
			_ = syscall.Kill(-s.pid, syscall.SIGKILL)
		}
		if s.c != nil {
			s.closeErr = s.c.Close() // a stdio server's stdin closed: its cue to exit
		}
		if s.proc != nil {
			if err := s.proc.end(); s.closeErr == nil {
				s.closeErr = err
			}
		}
		if s.http != nil {
			s.http.CloseIdleConnections()
		}
		s.cancel()
		if s.pid > 0 {
			_ = syscall.Kill(-s.pid, syscall.SIGKILL)
		}
		if s.proc != nil {
			// The group is dead; a process outside it may still hold the
			// pipes: stderr gets a moment to be read to its end.
			t := time.NewTimer(time.Second)
			select {
			case <-s.exited:
			case <-t.C:
			}
			t.Stop()
			_ = s.proc.stdout.Close()
			_ = s.proc.stderr.Close()
		}
		s.bgMu.Lock()
		s.closing = true
		s.bgMu.Unlock()
		s.wg.Wait()
		if !errors.Is(s.deadErr, ErrClosed) {
			s.closeErr = nil // how a broken session's process ended is no news
		}
	})
	return s.closeErr
}

// orphanedPipesWait is how long a stdio server's stderr may stay open
// after its process exited before a process it started is taken to hold
// it (see watchOrphanedPipes).
const orphanedPipesWait = time.Second

// watchOrphanedPipes ends the session of a stdio server whose process
// exited while a process it started (a helper, a browser, a `cmd &` of a
// wrapper script) still holds its stdout and stderr: neither reached EOF,
// so the exit went unnoticed, and the calls in flight (and those after
// them, sent to a process that was gone) waited for their deadlines, until
// HealthMisses health checks had gone unanswered. The session is marked
// dead, the server's process group is killed (freeing pipes its members
// hold) and the read end of stdout is closed (one outside the group may
// keep its end), which fails the requests in flight at once.
func (s *session) watchOrphanedPipes() {
	select {
	case <-s.exited:
		return
	case <-s.ctx.Done():
		return
	case <-s.proc.done:
	}
	t := time.NewTimer(orphanedPipesWait)
	defer t.Stop()
	select {
	case <-s.exited:
		return // the usual exit: the stderr watcher says so
	case <-s.ctx.Done():
		return
	case <-t.C:
	}
	s.markDead(errors.New("server process exited; a process it started still held its stdout and stderr"))
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.closing {
		return
	}
	_ = syscall.Kill(-s.pid, syscall.SIGKILL)
	_ = s.proc.stdout.Close()
}

// awaitStderr ends a child that failed its handshake and waits until its
// stderr has been read to EOF, so that stderrHint has its last words; close
// must wait for this, since it closes the pipe under the reader. A child that
// broke the connection (exiting) is on its way out and gets a moment to
// finish; otherwise, or if it lingers, its process group is killed: what it
// already wrote stays in the pipe. The timeouts are backstops only, for a
// process outside the group that keeps stderr open.
func (s *session) awaitStderr(exiting bool) {
	if s.stderr == nil {
		return
	}
	if exiting {
		select {
		case <-s.exited:
			return
		case <-time.After(time.Second):
		}
	}
	if s.pid > 0 {
		// Not yet waited for (close does that), so the pid is still ours.
		s.ending.Store(true)
		_ = syscall.Kill(-s.pid, syscall.SIGKILL)
	}
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
	}
}

// sseResponseTimeout is given to mcp-go's legacy SSE client as the bound
// of a wait for an answer, which mcp-go otherwise sets at 60 s: a tool call
// that takes longer failed with "timeout waiting for SSE response after
// 1m0s" whatever the job's timeout or the server's callTimeout. The
// request's context bounds it, as on the other transports (every request
// the pool sends without a caller has a deadline of its own).
const sseResponseTimeout = 365 * 24 * time.Hour

// exitHintWait bounds the wait for a child's exit status once its
// session broke: its stdout closing comes a moment before Wait returns
// (a moment that 250 ms did not always cover on a loaded machine; 1 s
// left the tests a margin to bet on). Only an error waits, and only for a
// child that broke the session but lives on.
const exitHintWait = 3 * time.Second

// exitHint says how a stdio server's process ended, for error messages
// ("(the server process ended: signal: killed)", "exit status 3"):
// "transport closed" alone did not say whether the server crashed, was
// killed or exited. Empty for other transports, a process still running
// after wait, or one the pool ended itself.
func (s *session) exitHint(wait time.Duration) string {
	if s.proc == nil {
		return ""
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-s.proc.done:
	case <-t.C:
		return ""
	}
	if s.ending.Load() {
		return ""
	}
	how := "exit status 0"
	if s.proc.waitErr != nil {
		how = s.proc.waitErr.Error()
	}
	return " (the server process ended: " + how + ")"
}

// strayStdoutWait bounds the wait for the stdout of a server that ended
// on its own to be read to its end, for strayHint: a child of it may still
// hold the pipe.
const strayStdoutWait = 2 * time.Second

// awaitStdout waits until mcp-go's reader has read a stdio server's stdout
// to its end (or strayStdoutWait passed): a server that printed its usage
// and exited is seen to have exited (broken pipe, stderr's end, its exit
// status) before the reader, in a goroutine of its own, has read the line.
func (s *session) awaitStdout() {
	if s.proc == nil || s.proc.out == nil || s.proc.out.ended == nil {
		return
	}
	t := time.NewTimer(strayStdoutWait)
	defer t.Stop()
	select {
	case <-s.proc.out.ended:
	case <-t.C:
	}
}

// strayHint quotes the last line a stdio server wrote to stdout that was
// no JSON-RPC message, for the handshake's error.
func (s *session) strayHint() string {
	if s.proc == nil || s.proc.out == nil {
		return ""
	}
	return s.proc.out.strayHint(s.secrets)
}

// stderrHint is the tail of the child's stderr, for error messages. The
// configured secrets are masked before the tail is cut to its last 400
// bytes, and a secret's part at the start of a buffer that dropped its
// beginning is masked too (redact.Window): the pool's scrub of the error
// matches whole secrets only, and a cut through one showed the rest.
func (s *session) stderrHint() string {
	if s.stderr == nil {
		return ""
	}
	raw, cut := s.stderr.tail()
	tail := strings.TrimSpace(redact.Window(raw, s.secrets, cut, false))
	if tail == "" {
		return ""
	}
	if i := strings.LastIndexByte(tail[:max(0, len(tail)-1)], '\n'); i >= 0 && len(tail)-i > 400 {
		tail = tail[i+1:]
	}
	if len(tail) > 400 {
		tail = "..." + tail[len(tail)-400:]
	}
	return " (server stderr: " + tail + ")"
}

// do runs one mcp-go client call for method and classifies its error: the
// caller's context ended, the server answered with a JSON-RPC error
// (RPCError), the session broke (ErrSessionLost), or the request failed.
func (s *session) do(ctx context.Context, method string, f func(context.Context) error) error {
	cp, ok := ctx.Value(captureKey{}).(*capture)
	if !ok {
		ctx, cp = withCapture(ctx)
	}
	err := f(ctx)
	if err != nil {
		err = s.withTooLarge(err)
	}
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		// In-process servers see the caller's context directly and answer
		// with an error once it ends: the context is the news.
		return fmt.Errorf("server %q: %s: %w", s.server, method, ctx.Err())
	case cp.rpcError() != nil:
		e := cp.rpcError()
		return &RPCError{Server: s.server, Method: method, Code: e.Code, Message: s.rpcMessage(e.Message)}
	case transportBroken(err, s.modern.Load()) || s.isDead():
		s.markDead(err)
		return fmt.Errorf("%w (the request may or may not have run): server %q: %s: %w%s%s", ErrSessionLost, s.server, method, err, s.exitHint(exitHintWait), s.stderrHint())
	}
	if r := s.refusal.Load(); r != nil && (r.status == http.StatusUnauthorized || r.status == http.StatusForbidden) &&
		(errors.Is(err, transport.ErrAuthorizationRequired) || strings.Contains(err.Error(), fmt.Sprintf("status %d", r.status))) {
		// Credentials that stopped working mid-job (a token expired): mcp-go
		// said only "authorization required" for a 401.
		err = refusedStream(err, r, s.server)
	}
	return fmt.Errorf("server %q: %s: %w", s.server, method, err)
}

// maxRPCErrorMessage bounds the message of a server's JSON-RPC error that
// an RPCError keeps: a server answering with an error of megabytes (up to
// maxMessageBytes) had all of it in Status and in the "connection failed"
// line logged at every attempt, and in a call's error.
const maxRPCErrorMessage = 8 << 10

// rpcMessage is m cut to maxRPCErrorMessage, saying so; a secret the cut
// goes through is masked by its part (redact.Window).
func (s *session) rpcMessage(m string) string {
	if len(m) <= maxRPCErrorMessage {
		return m
	}
	cut := maxRPCErrorMessage
	for cut > 0 && !utf8.RuneStart(m[cut]) {
		cut--
	}
	return redact.Window(m[:cut], s.secrets, false, true) + fmt.Sprintf("... (%d bytes)", len(m))
}

// transportBroken reports whether err means the session cannot carry more
// requests (as opposed to one failed request). Only typed errors count:
// mcp-go's ErrTransportClosed (stdio), ErrSessionTerminated (HTTP 404 for an
// expired session) and the OS's network and pipe errors. The errors mcp-go
// has no type for (a lost SSE stream) are caught by the session being marked
// dead first (OnConnectionLost, the child's stderr EOF). On 2026-07-28 there
// is no session to expire, and a 404 is that protocol's "method not found".
func transportBroken(err error, modern bool) bool {
	var netErr *net.OpError
	switch {
	case errors.Is(err, transport.ErrSessionTerminated):
		return !modern
	case errors.Is(err, transport.ErrTransportClosed),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, io.ErrClosedPipe),
		errors.Is(err, fs.ErrClosed),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.As(err, &netErr):
		return true
	}
	return false
}

// listTools reads the whole (paginated) tool list through mcp-go's
// ListTools, keeping schemas verbatim (rawToolsList). skipped says which
// tool definitions were unusable and left out.
func (s *session) listTools(ctx context.Context) (tools []Tool, skipped []error, err error) {
	ctx, cp := withCapture(ctx)
	var res *mcp.ListToolsResult
	err = s.do(ctx, string(mcp.MethodToolsList), func(ctx context.Context) (err error) {
		res, err = s.c.ListTools(ctx, mcp.ListToolsRequest{})
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	pages, undecodable := cp.pages()
	return s.rawToolsList(pages, undecodable, res.Tools)
}

// callTool runs tools/call within the session's concurrency limit.
func (s *session) callTool(ctx context.Context, original string, args json.RawMessage) (Result, error) {
	if isNull(args) {
		args = json.RawMessage("{}")
	} else if !json.Valid(args) {
		return Result{}, errors.New("arguments are not valid JSON")
	}
	select {
	case s.sem <- struct{}{}:
	default:
		if s.slotHook != nil {
			s.slotHook(s.server)
		}
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			return Result{}, fmt.Errorf("server %q: waiting for a free slot: %w", s.server, ctx.Err())
		case <-s.dead:
			// Not sent: not ErrSessionLost ("may or may not have run"),
			// and safe to send on the next session (View.callOn).
			return Result{}, &notSentError{fmt.Errorf("%w: server %q: the session broke while the call waited for a free slot (maxConcurrent), so it was not sent: %w",
				ErrServerUnavailable, s.server, s.deadErr)}
		}
	}
	defer func() { <-s.sem }()
	ctx, cp := withCapture(ctx)
	var res *mcp.CallToolResult
	err := s.do(ctx, string(mcp.MethodToolsCall), func(ctx context.Context) (err error) {
		req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: original, Arguments: args}}
		var meta mcp.Meta
		if key := journal.KeyFromContext(ctx); key != "" {
			// Servers that can deduplicate a call do, across attempts.
			meta.AdditionalFields = map[string]any{journal.MetaKey: key}
		}
		if f := progressFrom(ctx); f != nil {
			tok, done := s.progress.add(f)
			defer done()
			meta.ProgressToken = tok
		}
		if meta.AdditionalFields != nil || meta.ProgressToken != nil {
			req.Params.Meta = &meta
		}
		res, err = s.c.CallTool(ctx, req)
		return err
	})
	if err != nil {
		var rpcErr *RPCError
		if raw := cp.raw(); len(raw) > 0 && !errors.As(err, &rpcErr) && !errors.Is(err, ErrSessionLost) && ctx.Err() == nil {
			// The server answered but mcp-go refused the result: content
			// of a type it does not know (newer protocols add some), or
			// isError without content. The answer is still the tool's.
			if r, ok := lenientResult(raw[len(raw)-1]); ok {
				return r, nil
			}
		}
		return Result{}, err
	}
	return flattenResult(res), nil
}

// lenientResult reads a tools/call result mcp-go could not decode: each
// content item it knows is flattened as usual, others are summarised by
// type, and an error without content says so.
func lenientResult(raw json.RawMessage) (Result, bool) {
	var r struct {
		Content           []map[string]any `json:"content"`
		IsError           bool             `json:"isError"`
		StructuredContent json.RawMessage  `json:"structuredContent"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return Result{}, false
	}
	res := &mcp.CallToolResult{IsError: r.IsError, RawStructuredContent: r.StructuredContent}
	for _, m := range r.Content {
		c, err := mcp.ParseContent(m)
		if err != nil {
			typ, _ := m["type"].(string)
			c = mcp.NewTextContent(fmt.Sprintf("[content of unknown type %q]", typ))
		}
		res.Content = append(res.Content, c)
	}
	return flattenResult(res), true
}

// silentError is the text of an error result that says nothing (no
// content, or content of no text): without it the model read "Error: ".
const silentError = "the tool reported an error and said nothing more"

// healthCheck asks the server whether it is there: ping on 2025-11-25;
// 2026-07-28 removed ping (mcp-go's Ping sends nothing there), so
// server/discover, the cheapest request such a server must answer.
func (s *session) healthCheck(ctx context.Context) error {
	if s.modern.Load() {
		return s.do(ctx, string(mcp.MethodServerDiscover), func(ctx context.Context) error {
			_, err := s.c.Discover(ctx, mcp.DiscoverRequest{})
			return err
		})
	}
	return s.do(ctx, string(mcp.MethodPing), func(ctx context.Context) error {
		return s.c.Ping(ctx) //nolint:staticcheck // deprecated for 2026-07-28 only; this is the 2025-11-25 path
	})
}

// flattenResult flattens a CallToolResult for the model: text content
// joined, other content summarised, structuredContent kept byte for byte.
func flattenResult(r *mcp.CallToolResult) Result {
	parts := make([]string, 0, len(r.Content))
	for _, c := range r.Content {
		switch c := c.(type) {
		case mcp.TextContent:
			parts = append(parts, c.Text)
		case mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes base64]", c.MIMEType, len(c.Data)))
		case mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes base64]", c.MIMEType, len(c.Data)))
		case mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s %s]", c.Name, c.URI))
		case mcp.EmbeddedResource:
			parts = append(parts, resourceText(c.Resource))
		default:
			parts = append(parts, fmt.Sprintf("[%T content]", c))
		}
	}
	res := Result{Text: strings.Join(parts, "\n"), IsError: r.IsError}
	for i, at := 0, 0; i+1 < len(parts); i++ {
		at += len(parts[i])
		res.joins = append(res.joins, at)
		at++
	}
	if !isNull(r.RawStructuredContent) {
		res.Structured = compact(r.RawStructuredContent)
		if res.Text == "" {
			res.Text = string(res.Structured)
		}
	}
	if res.IsError && strings.TrimSpace(res.Text) == "" {
		res.Text = silentError
	}
	return res
}

// resourceText is a resource's text, or a summary of binary contents.
func resourceText(rc mcp.ResourceContents) string {
	switch rc := rc.(type) {
	case mcp.TextResourceContents:
		return rc.Text
	case mcp.BlobResourceContents:
		return fmt.Sprintf("[resource %s %s, %d bytes base64]", rc.URI, rc.MIMEType, len(rc.Blob))
	}
	return fmt.Sprintf("[%T]", rc)
}

// listResources lists resources and resource templates, if the server has any.
func (s *session) listResources(ctx context.Context) ([]Resource, error) {
	if s.caps.Resources == nil {
		return nil, nil
	}
	var rs *mcp.ListResourcesResult
	if err := s.do(ctx, string(mcp.MethodResourcesList), func(ctx context.Context) (err error) {
		rs, err = s.c.ListResources(ctx, mcp.ListResourcesRequest{})
		return err
	}); err != nil {
		return nil, err
	}
	out := make([]Resource, 0, len(rs.Resources))
	for _, r := range rs.Resources {
		out = append(out, Resource{Server: s.server, URI: r.URI, Name: r.Name, Description: r.Description, MIMEType: r.MIMEType})
	}
	var ts *mcp.ListResourceTemplatesResult
	err := s.do(ctx, string(mcp.MethodResourcesTemplatesList), func(ctx context.Context) (err error) {
		ts, err = s.c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
		return err
	})
	switch {
	case err == nil:
		for _, t := range ts.ResourceTemplates {
			r := Resource{Server: s.server, Name: t.Name, Description: t.Description, MIMEType: t.MIMEType}
			if t.URITemplate != nil && t.URITemplate.Template != nil {
				r.URITemplate = t.URITemplate.Raw()
			}
			out = append(out, r)
		}
	case errors.Is(err, ErrSessionLost) || ctx.Err() != nil:
		return nil, err
	default:
		// Templates are optional: a server without them may answer with an
		// error (on 2026-07-28 over HTTP, a 404).
	}
	return out, nil
}

// readResource reads one resource and returns its contents as text (binary
// contents are summarised).
func (s *session) readResource(ctx context.Context, uri string) (string, error) {
	var r *mcp.ReadResourceResult
	if err := s.do(ctx, string(mcp.MethodResourcesRead), func(ctx context.Context) (err error) {
		r, err = s.c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: uri}})
		return err
	}); err != nil {
		return "", err
	}
	parts := make([]string, 0, len(r.Contents))
	for _, c := range r.Contents {
		if b, ok := c.(mcp.BlobResourceContents); ok {
			parts = append(parts, fmt.Sprintf("[%s %s, %d bytes base64]", b.URI, b.MIMEType, len(b.Blob)))
			continue
		}
		parts = append(parts, resourceText(c))
	}
	return strings.Join(parts, "\n"), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
	cut bool // bytes before buf were dropped
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-b.max:]...)
		b.cut = true
	}
	return len(p), nil
}

// tail is what the buffer holds, and whether bytes before it were dropped.
func (b *tailBuffer) tail() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf), b.cut
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// warnHandler passes on only warnings and errors.
type warnHandler struct{ slog.Handler }

func (h warnHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}
func (h warnHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return warnHandler{h.Handler.WithAttrs(as)}
}
func (h warnHandler) WithGroup(g string) slog.Handler { return warnHandler{h.Handler.WithGroup(g)} }
