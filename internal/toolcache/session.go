package toolcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// legacyProtocol reports whether v is a protocol version negotiated with the
// initialize handshake (everything before 2026-07-28).
func legacyProtocol(v string) bool {
	return mcp.IsValidProtocolVersion(v) && !mcp.IsModernProtocol(v)
}

// session is one connected MCP client: a child process, an HTTP/SSE session
// or an in-process server.
type session struct {
	server string
	cfg    ServerConfig
	c      *client.Client
	// sem bounds the calls in flight (MaxConcurrent).
	sem chan struct{}
	ids atomic.Int64

	dead     chan struct{} // closed once the session is known broken or closed
	deadOnce sync.Once
	deadErr  error          // set before dead is closed
	onDead   func(*session) // set before the session is published; may be nil

	stderr *tailBuffer   // a child's stderr, complete once exited is closed
	exited chan struct{} // closed when a child's stderr reaches EOF (it exited)
	pid    int
	cancel context.CancelFunc // ends the process context (last resort kill)
	http   *http.Client       // an HTTP or SSE session's own client
	wg     sync.WaitGroup     // the stderr watcher

	protocol    string
	info        mcp.Implementation
	caps        mcp.ServerCapabilities
	connectTime time.Duration

	closeOnce sync.Once
	closeErr  error
	bgMu      sync.Mutex // guards closing against new background sends
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
}

// dial connects to a server and performs the handshake. ctx bounds the
// handshake only; the session lives until close.
func (d *dialer) dial(ctx context.Context, name string, cfg ServerConfig, inproc *server.MCPServer) (*session, error) {
	start := time.Now()
	if d.connectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.connectTimeout)
		defer cancel()
	}
	procCtx, cancel := context.WithCancel(context.Background())
	s := &session{
		server: name,
		cfg:    cfg,
		sem:    make(chan struct{}, cfg.maxConcurrent()),
		dead:   make(chan struct{}),
		exited: make(chan struct{}),
		cancel: cancel,
	}
	var tr transport.Interface
	switch cfg.Type {
	case TypeStdio:
		var cmdRef *exec.Cmd
		tr = transport.NewStdioWithOptions(cfg.Command, envList(cfg.Env), cfg.Args,
			transport.WithCommandFunc(func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
				cmd := exec.CommandContext(ctx, command, args...)
				cmd.Env = append(os.Environ(), env...)
				cmd.Dir = cfg.Cwd
				cmd.SysProcAttr = childProcAttr()
				cmdRef = cmd
				return cmd, nil
			}),
			transport.WithCommandLogger(d.logger))
		c := client.NewClient(tr, client.WithProtocolVersion(protocolFor(cfg)))
		if err := c.Start(procCtx); err != nil {
			cancel()
			return nil, fmt.Errorf("start %q: %w", cfg.Command, err)
		}
		s.c = c
		if cmdRef != nil && cmdRef.Process != nil {
			s.pid = cmdRef.Process.Pid
		}
		// The child's stderr reaches EOF when it exits: that is how a crash
		// is noticed even when no request is in flight. It is read here from
		// mcp-go's buffer, not through WithCommandStderrWriter, whose copy
		// runs on a goroutine of its own that may still be writing when EOF
		// is seen: once exited is closed, s.stderr holds all there was.
		if r, ok := client.GetStderr(c); ok {
			s.stderr = &tailBuffer{max: 4096}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				_, _ = io.Copy(s.stderr, r)
				close(s.exited)
				s.markDead(errors.New("server process exited"))
			}()
		}
	case TypeHTTP:
		s.http = newHTTPClient()
		opts := []transport.StreamableHTTPCOption{transport.WithHTTPBasicClient(s.http), transport.WithContinuousListening(), transport.WithHTTPLogger(d.logger)}
		if len(cfg.Headers) > 0 {
			opts = append(opts, transport.WithHTTPHeaders(cfg.Headers))
		}
		t, err := transport.NewStreamableHTTP(cfg.URL, opts...)
		if err != nil {
			cancel()
			return nil, err
		}
		tr = t
	case TypeSSE:
		s.http = newHTTPClient()
		opts := []transport.ClientOption{transport.WithHTTPClient(s.http), transport.WithSSELogger(d.logger)}
		if len(cfg.Headers) > 0 {
			opts = append(opts, transport.WithHeaders(cfg.Headers))
		}
		t, err := transport.NewSSE(cfg.URL, opts...)
		if err != nil {
			cancel()
			return nil, err
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
	if s.c == nil {
		s.c = client.NewClient(tr, client.WithProtocolVersion(protocolFor(cfg)))
		if err := s.c.Start(procCtx); err != nil {
			_ = s.close()
			return nil, fmt.Errorf("connect %s: %w", cfg.URL, err)
		}
	}
	s.c.OnNotification(func(n mcp.JSONRPCNotification) {
		if d.notify != nil {
			d.notify(name, s, n)
		}
	})
	res, err := s.c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: protocolFor(cfg),
		ClientInfo:      d.clientInfo,
	}})
	if err != nil {
		// A server that fails the handshake usually says why on stderr.
		s.awaitStderr(transportBroken(err))
		_ = s.close()
		return nil, fmt.Errorf("initialize: %w%s", err, s.stderrHint())
	}
	s.protocol = res.ProtocolVersion
	s.info = res.ServerInfo
	s.caps = res.Capabilities
	s.connectTime = time.Since(start)
	return s, nil
}

// newHTTPClient is a client with a connection pool of its own. mcp-go's
// default client uses http.DefaultTransport, which anything in the process
// may CloseIdleConnections on (httptest.Server.Close does): a request that is
// just taking an idle connection then fails ("CloseIdleConnections called"),
// which here fails a handshake or a call.
func newHTTPClient() *http.Client {
	return &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
}

// protocolFor is the version offered in initialize. Pinning a pre-2026
// version makes mcp-go skip its server/discover probe, which costs a round
// trip on servers that reject it and 5 s on servers that ignore it, while
// every current server answers initialize at once.
func protocolFor(cfg ServerConfig) string {
	if cfg.ProtocolVersion != "" {
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
		if s.onDead != nil {
			s.onDead(s)
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
// and the watcher goroutine is waited for.
func (s *session) close() error {
	s.closeOnce.Do(func() {
		s.markDead(ErrClosed)
		if s.pid > 0 && s.deadErr != ErrClosed {
			// A broken session gets no graceful stdin-close/SIGTERM grace
			// period (5 s for a hung server): reconnecting is waiting on it.
			_ = syscall.Kill(-s.pid, syscall.SIGKILL)
		}
		if s.c != nil {
			s.closeErr = s.c.Close()
		}
		if s.http != nil {
			s.http.CloseIdleConnections()
		}
		s.cancel()
		if s.pid > 0 {
			_ = syscall.Kill(-s.pid, syscall.SIGKILL)
		}
		s.bgMu.Lock()
		s.closing = true
		s.bgMu.Unlock()
		s.wg.Wait()
		if s.deadErr != ErrClosed {
			s.closeErr = nil // how a broken session's process ended is no news
		}
	})
	return s.closeErr
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
		_ = syscall.Kill(-s.pid, syscall.SIGKILL)
	}
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
	}
}

// stderrHint is the tail of the child's stderr, for error messages.
func (s *session) stderrHint() string {
	if s.stderr == nil {
		return ""
	}
	tail := strings.TrimSpace(s.stderr.String())
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

// request sends one JSON-RPC request with an id of our own (so that a
// cancellation can name it) and returns the raw result.
func (s *session) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := mcp.NewRequestId("jetagent-" + strconv.FormatInt(s.ids.Add(1), 10))
	resp, err := s.c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION,
		ID:      id,
		Method:  method,
		Params:  params,
	})
	if err != nil {
		if ctx.Err() != nil {
			s.sendCancelled(id, context.Cause(ctx))
			return nil, fmt.Errorf("toolcache: server %q: %s: %w", s.server, method, ctx.Err())
		}
		if transportBroken(err) {
			s.markDead(err)
			return nil, fmt.Errorf("%w (the request may or may not have run): server %q: %s: %w%s", ErrSessionLost, s.server, method, err, s.stderrHint())
		}
		return nil, fmt.Errorf("toolcache: server %q: %s: %w", s.server, method, err)
	}
	if resp.Error != nil {
		if ctx.Err() != nil {
			// In-process servers see the caller's context directly and
			// answer with an error once it ends.
			return nil, fmt.Errorf("toolcache: server %q: %s: %w", s.server, method, ctx.Err())
		}
		return nil, &RPCError{Server: s.server, Method: method, Code: resp.Error.Code, Message: resp.Error.Message}
	}
	return resp.Result, nil
}

// sendCancelled tells the server to stop a request whose caller gave up
// (notifications/cancelled), on every transport: mcp-go does it only over
// stdio, and only for its own request ids. Best effort, off the caller's path.
func (s *session) sendCancelled(id mcp.RequestId, cause error) {
	reason := "cancelled"
	if cause != nil {
		reason = cause.Error()
	}
	n := mcp.JSONRPCNotification{
		JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{
			Method: string(mcp.MethodNotificationCancelled),
			Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": reason}},
		},
	}
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.closing {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.c.GetTransport().SendNotification(ctx, n)
	}()
}

// transportBroken reports whether err means the session cannot carry more
// requests (as opposed to one failed request).
func transportBroken(err error) bool {
	var netErr *net.OpError
	switch {
	case errors.Is(err, transport.ErrTransportClosed),
		errors.Is(err, transport.ErrSessionTerminated),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET),
		errors.As(err, &netErr):
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "broken pipe") || strings.Contains(msg, "file already closed")
}

// listTools reads the whole (paginated) tool list, keeping schemas verbatim.
func (s *session) listTools(ctx context.Context) ([]Tool, error) {
	var tools []Tool
	cursor := ""
	seen := map[string]bool{}
	for {
		var params any
		if cursor != "" {
			params = map[string]string{"cursor": cursor}
		}
		raw, err := s.request(ctx, string(mcp.MethodToolsList), params)
		if err != nil {
			return nil, err
		}
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("toolcache: server %q: tools/list: %w", s.server, err)
		}
		for _, rt := range page.Tools {
			t, err := toolFromRaw(s.server, rt)
			if err != nil {
				return nil, fmt.Errorf("toolcache: server %q: tools/list: %w", s.server, err)
			}
			if s.cfg.toolAllowed(t.Original) {
				tools = append(tools, t)
			}
		}
		if page.NextCursor == "" || seen[page.NextCursor] {
			break
		}
		seen[page.NextCursor] = true
		cursor = page.NextCursor
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].Original < tools[j].Original })
	return tools, nil
}

// callTool runs tools/call within the session's concurrency limit.
func (s *session) callTool(ctx context.Context, original string, args json.RawMessage) (Result, error) {
	if isNull(args) {
		args = json.RawMessage("{}")
	} else if !json.Valid(args) {
		return Result{}, fmt.Errorf("toolcache: call %s: arguments are not valid JSON", original)
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return Result{}, fmt.Errorf("toolcache: call %s on server %q: waiting for a free slot: %w", original, s.server, ctx.Err())
	case <-s.dead:
		return Result{}, fmt.Errorf("%w: server %q: %v", ErrSessionLost, s.server, s.deadErr)
	}
	defer func() { <-s.sem }()
	raw, err := s.request(ctx, string(mcp.MethodToolsCall), struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}{original, args})
	if err != nil {
		return Result{}, fmt.Errorf("call %s: %w", original, err)
	}
	return parseCallResult(raw)
}

func (s *session) ping(ctx context.Context) error {
	_, err := s.request(ctx, string(mcp.MethodPing), nil)
	return err
}

// parseCallResult flattens a CallToolResult for the model: text content
// joined, other content summarised, structuredContent kept.
func parseCallResult(raw json.RawMessage) (Result, error) {
	var r struct {
		Content []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			MIMEType string `json:"mimeType"`
			Data     string `json:"data"`
			URI      string `json:"uri"`
			Name     string `json:"name"`
			Resource *struct {
				URI      string `json:"uri"`
				MIMEType string `json:"mimeType"`
				Text     string `json:"text"`
				Blob     string `json:"blob"`
			} `json:"resource"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return Result{}, fmt.Errorf("toolcache: tools/call result: %w", err)
	}
	parts := make([]string, 0, len(r.Content))
	for _, c := range r.Content {
		switch c.Type {
		case "text":
			parts = append(parts, c.Text)
		case "image", "audio":
			parts = append(parts, fmt.Sprintf("[%s %s, %d bytes base64]", c.Type, c.MIMEType, len(c.Data)))
		case "resource_link":
			parts = append(parts, fmt.Sprintf("[resource %s %s]", c.Name, c.URI))
		case "resource":
			if c.Resource != nil && c.Resource.Text != "" {
				parts = append(parts, c.Resource.Text)
			} else if c.Resource != nil {
				parts = append(parts, fmt.Sprintf("[resource %s %s, %d bytes base64]", c.Resource.URI, c.Resource.MIMEType, len(c.Resource.Blob)))
			}
		default:
			parts = append(parts, "["+c.Type+" content]")
		}
	}
	res := Result{Text: strings.Join(parts, "\n"), IsError: r.IsError}
	if !isNull(r.StructuredContent) {
		res.Structured = compact(r.StructuredContent)
		if res.Text == "" {
			res.Text = string(res.Structured)
		}
	}
	return res, nil
}

// listResources lists resources and resource templates, if the server has any.
func (s *session) listResources(ctx context.Context) ([]Resource, error) {
	if s.caps.Resources == nil {
		return nil, nil
	}
	var out []Resource
	for _, kind := range []string{string(mcp.MethodResourcesList), string(mcp.MethodResourcesTemplatesList)} {
		cursor := ""
		seen := map[string]bool{}
		for {
			var params any
			if cursor != "" {
				params = map[string]string{"cursor": cursor}
			}
			raw, err := s.request(ctx, kind, params)
			if err != nil {
				var rpc *RPCError
				if kind == string(mcp.MethodResourcesTemplatesList) && errors.As(err, &rpc) {
					break // templates are optional
				}
				return nil, err
			}
			var page struct {
				Resources         []Resource `json:"resources"`
				ResourceTemplates []Resource `json:"resourceTemplates"`
				NextCursor        string     `json:"nextCursor"`
			}
			if err := json.Unmarshal(raw, &page); err != nil {
				return nil, fmt.Errorf("toolcache: server %q: %s: %w", s.server, kind, err)
			}
			for _, r := range append(page.Resources, page.ResourceTemplates...) {
				r.Server = s.server
				out = append(out, r)
			}
			if page.NextCursor == "" || seen[page.NextCursor] {
				break
			}
			seen[page.NextCursor] = true
			cursor = page.NextCursor
		}
	}
	return out, nil
}

// readResource reads one resource and returns its contents as text (binary
// contents are summarised).
func (s *session) readResource(ctx context.Context, uri string) (string, error) {
	raw, err := s.request(ctx, string(mcp.MethodResourcesRead), map[string]string{"uri": uri})
	if err != nil {
		return "", err
	}
	var r struct {
		Contents []struct {
			URI      string  `json:"uri"`
			MIMEType string  `json:"mimeType"`
			Text     *string `json:"text"`
			Blob     string  `json:"blob"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return "", fmt.Errorf("toolcache: server %q: resources/read: %w", s.server, err)
	}
	parts := make([]string, 0, len(r.Contents))
	for _, c := range r.Contents {
		if c.Text != nil {
			parts = append(parts, *c.Text)
		} else {
			parts = append(parts, fmt.Sprintf("[%s %s, %d bytes base64]", c.URI, c.MIMEType, len(c.Blob)))
		}
	}
	return strings.Join(parts, "\n"), nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append([]byte(nil), b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
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
