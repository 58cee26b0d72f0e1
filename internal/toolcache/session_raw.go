package toolcache

// This file is the one place where the session layer handles JSON-RPC
// messages itself instead of through mcp-go's client API. Everything else in
// session.go goes through client.Client (Initialize, ListTools, CallTool,
// ListResources, ReadResource, Ping, Discover, Listen), which keeps mcp-go's
// request ids, pagination, per-request _meta and HTTP headers.
//
// It follows MCP 2025-11-25 (initialize handshake, notifications/cancelled,
// Streamable HTTP sessions) and 2026-07-28 (sessionless: no handshake, the
// version and client identity in every request's _meta, cancellation over
// HTTP by closing the request's stream), whose tools/list result has the same
// shape, {"tools": [...], "nextCursor": "..."}, as implemented by mcp-go
// v1.2.1.
//
// What mcp-go's client API does not keep, and this file does:
//
//   - Tool schemas byte for byte. ListTools decodes each tool into mcp.Tool,
//     whose InputSchema struct keeps only type, properties, required, $defs
//     and additionalProperties, and rewrites "#/definitions/" references; the
//     registry validates calls against the exact schema the server sent, and
//     the normalised copy for providers keeps the server's key order (token
//     counts). tapTransport keeps the raw result of every tools/list that
//     mcp-go's ListTools sends, and rawToolsList decodes the tools from those
//     bytes.
//   - Tools mcp.Tool cannot decode (an inputSchema that is a string, a
//     "type" that is a number): mcp-go fails the whole tools/list over one,
//     so the tap hands it the page without them (withoutUndecodableTools)
//     and rawToolsList reports each as left out.
//   - JSON-RPC error codes. mcp-go turns an error response into a Go error
//     that keeps the code only for the standard ones; RPCError carries it.
//   - notifications/cancelled over HTTP and SSE. mcp-go sends it only over
//     stdio and in-process; on 2025-11-25 the server learns of a cancelled
//     HTTP request no other way. (On 2026-07-28 closing the request's stream
//     is the cancellation, and nothing is sent.)
//   - Signs of life for the health check: any response or notification.
//   - A caller's deadline: mcp-go's stdio write and its in-process
//     handler call do not watch it (see send).

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// tapTransport wraps a session's mcp-go transport. It implements the optional
// interfaces mcp-go's client looks for only where the wrapped transport does
// (see httpTapTransport): mcp-go decides by them whether it sends
// notifications/cancelled itself and where the negotiated version goes.
type tapTransport struct {
	inner transport.Interface
	s     *session
}

// httpTapTransport is tapTransport for Streamable HTTP and SSE.
type httpTapTransport struct{ *tapTransport }

var (
	_ transport.BidirectionalInterface = (*tapTransport)(nil)
	_ transport.HTTPConnection         = httpTapTransport{}
)

func newTap(inner transport.Interface, s *session) transport.Interface {
	t := &tapTransport{inner: inner, s: s}
	if _, ok := inner.(transport.HTTPConnection); ok {
		return httpTapTransport{t}
	}
	return t
}

// captureKey marks a request context whose responses the tap records.
type captureKey struct{}

// capture is what the tap saw of the requests sent with one context.
type capture struct {
	mu      sync.Mutex
	results []json.RawMessage // raw results, in order
	// undecodable has, for each of results (a tools/list page), the tools
	// mcp-go could not decode, by their index in the page (see
	// withoutUndecodableTools); nil where there were none.
	undecodable []map[int]error
	rpcErr      *mcp.JSONRPCErrorDetails
}

func withCapture(ctx context.Context) (context.Context, *capture) {
	c := &capture{}
	return context.WithValue(ctx, captureKey{}, c), c
}

func (c *capture) rpcError() *mcp.JSONRPCErrorDetails {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rpcErr
}

func (c *capture) raw() []json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.results
}

// pages is raw with the undecodable tools of each result.
func (c *capture) pages() ([]json.RawMessage, []map[int]error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.results, c.undecodable
}

func (t *tapTransport) Start(ctx context.Context) error { return t.inner.Start(ctx) }
func (t *tapTransport) Close() error                    { return t.inner.Close() }
func (t *tapTransport) GetSessionId() string            { return t.inner.GetSessionId() }

func (t *tapTransport) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	resp, err := t.send(ctx, req)
	if err != nil {
		if ctx.Err() != nil && t.forwardsCancel(req.Method) {
			t.s.sendCancelled(req.ID, ctx.Err())
		}
		return resp, err
	}
	t.s.heard()
	if resp == nil {
		return resp, nil
	}
	verbatim := resp.Result
	var bad map[int]error
	if resp.Error == nil && req.Method == string(mcp.MethodToolsList) {
		if kept, b := withoutUndecodableTools(verbatim); b != nil {
			r := *resp
			r.Result, bad = kept, b
			resp = &r // what mcp-go decodes
		}
	}
	if c, ok := ctx.Value(captureKey{}).(*capture); ok {
		c.mu.Lock()
		if resp.Error != nil {
			e := *resp.Error
			c.rpcErr = &e
		} else {
			c.results = append(c.results, verbatim)
			c.undecodable = append(c.undecodable, bad)
		}
		c.mu.Unlock()
	}
	return resp, nil
}

// withoutUndecodableTools is a tools/list result without the tools that
// mcp-go cannot decode into mcp.Tool (an inputSchema that is a string or a
// boolean, a "type" that is a number, a hint that is no boolean), with the
// decoding error of each by its index; nil, nil when mcp-go can decode the
// whole result (or when it is no object with a tools array: mcp-go reports
// that). mcp-go decodes a page whole, so one such tool failed the server's
// whole list, at every attempt: the server was never connected.
func withoutUndecodableTools(result json.RawMessage) (json.RawMessage, map[int]error) {
	var whole mcp.ListToolsResult
	if json.Unmarshal(result, &whole) == nil {
		return nil, nil
	}
	var page map[string]json.RawMessage
	var tools []json.RawMessage
	if json.Unmarshal(result, &page) != nil || json.Unmarshal(page["tools"], &tools) != nil {
		return nil, nil
	}
	bad := map[int]error{}
	kept := make([]json.RawMessage, 0, len(tools))
	for i, raw := range tools {
		var tool mcp.Tool
		if err := json.Unmarshal(raw, &tool); err != nil {
			bad[i] = err
			continue
		}
		kept = append(kept, raw)
	}
	if len(bad) == 0 {
		return nil, nil // the trouble is elsewhere in the result
	}
	var err error
	if page["tools"], err = json.Marshal(kept); err != nil {
		return nil, nil
	}
	out, err := json.Marshal(page)
	if err != nil {
		return nil, nil
	}
	return out, bad
}

// send is the inner transport's SendRequest, given up on when ctx ends.
// mcp-go's stdio transport writes a request to the child's stdin without
// looking at ctx, holding a lock every request takes: a server that stops
// reading (hung, or too busy to read) with a request larger than the
// pipe's buffer would hold that caller, and every request after it (the
// health checks included, so the server was never replaced), past any
// deadline. A write given up on goes on until the server reads again or
// the session is closed (which closes stdin under it). mcp-go's
// in-process transport runs the server's handler in the caller's
// goroutine: a tool handler that does not watch its context held the call
// past the server's callTimeout and the job's deadline. HTTP and SSE
// honour ctx themselves, so only stdio and in-process pay for a goroutine;
// a panic in it (an in-process handler's) is raised again in the caller,
// as it was before, for the caller's recovery.
func (t *tapTransport) send(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	if t.s.cfg.Type != TypeStdio && t.s.cfg.Type != TypeInProcess {
		return t.inner.SendRequest(ctx, req)
	}
	type answer struct {
		resp     *transport.JSONRPCResponse
		err      error
		panicked any
	}
	ch := make(chan answer, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- answer{panicked: p}
			}
		}()
		resp, err := t.inner.SendRequest(ctx, req)
		ch <- answer{resp: resp, err: err}
	}()
	select {
	case a := <-ch:
		if a.panicked != nil {
			panic(a.panicked)
		}
		return a.resp, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// forwardsCancel reports whether the tap must send notifications/cancelled
// for an abandoned request: HTTP and SSE on a 2025-11-25-or-older session
// (mcp-go does it for the other transports), never for the handshake.
func (t *tapTransport) forwardsCancel(method string) bool {
	if _, http := t.inner.(transport.HTTPConnection); !http || t.s.modern.Load() {
		return false
	}
	return method != string(mcp.MethodInitialize) && method != string(mcp.MethodServerDiscover)
}

func (t *tapTransport) SendNotification(ctx context.Context, n mcp.JSONRPCNotification) error {
	return t.inner.SendNotification(ctx, n)
}

func (t *tapTransport) SetNotificationHandler(h func(mcp.JSONRPCNotification)) {
	t.inner.SetNotificationHandler(func(n mcp.JSONRPCNotification) {
		t.s.heard()
		h(n)
	})
}

func (t *tapTransport) SetRequestHandler(h transport.RequestHandler) {
	if b, ok := t.inner.(transport.BidirectionalInterface); ok {
		b.SetRequestHandler(h)
	}
}

func (t httpTapTransport) SetProtocolVersion(v string) {
	t.inner.(transport.HTTPConnection).SetProtocolVersion(v)
}

// RequiresLegacyProtocol is what mcp-go asks of a Streamable HTTP transport
// that listens on the GET stream (removed in 2026-07-28).
func (t httpTapTransport) RequiresLegacyProtocol() bool {
	l, ok := t.inner.(interface{ RequiresLegacyProtocol() bool })
	return ok && l.RequiresLegacyProtocol()
}

// SetConnectionLostHandler is how the SSE transport reports its stream ending.
func (t httpTapTransport) SetConnectionLostHandler(h func(error)) {
	if l, ok := t.inner.(interface{ SetConnectionLostHandler(func(error)) }); ok {
		l.SetConnectionLostHandler(h)
	}
}

// heard records a sign of life from the server.
func (s *session) heard() { s.lastHeard.Store(time.Now().UnixNano()) }

// heardSince reports whether the server sent anything after t.
func (s *session) heardSince(t time.Time) bool { return s.lastHeard.Load() > t.UnixNano() }

// sendCancelled tells the server to stop a request whose caller gave up.
// Best effort, off the caller's path, and never after close has begun.
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

// rawToolsList decodes the tools of the tools/list results the tap captured,
// keeping schemas verbatim. kept names the tools mcp-go's ListTools returned:
// on 2026-07-28 over HTTP it drops tools whose x-mcp-header annotations are
// invalid, as the protocol requires, and so does this. Tools whose
// definitions are unusable are left out and reported in skipped.
func (s *session) rawToolsList(pages []json.RawMessage, undecodable []map[int]error, kept []mcp.Tool) (tools []Tool, skipped []error, err error) {
	keep := make(map[string]bool, len(kept))
	for _, t := range kept {
		keep[t.Name] = true
	}
	seen := map[string]bool{}
	for p, raw := range pages {
		var page struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, nil, fmt.Errorf("server %q: tools/list: %w", s.server, err)
		}
		var bad map[int]error
		if p < len(undecodable) {
			bad = undecodable[p]
		}
		for i, rt := range page.Tools {
			t, err := toolFromRaw(s.server, rt)
			if err == nil {
				err = servable(rt)
			}
			if err == nil && bad[i] != nil {
				err = fmt.Errorf("tool %q: %w", t.Original, bad[i])
			}
			if err != nil {
				// One broken definition (no name, a schema that is not an
				// object, a tool that runs only as a task) costs that
				// tool, not the server's whole list.
				skipped = append(skipped, err)
				continue
			}
			if seen[t.Original] {
				// A second definition of a name: a call reaches whichever
				// the server runs by that name, so only one is offered.
				skipped = append(skipped, fmt.Errorf("tool %q: listed again; the first definition is kept", t.Original))
				continue
			}
			if keep[t.Original] && s.cfg.toolAllowed(t.Original) {
				seen[t.Original] = true
				t.Annotations = s.cfg.hints(t.Original, t.Annotations)
				tools = append(tools, t)
			}
		}
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].Original < tools[j].Original })
	return tools, skipped, nil
}
