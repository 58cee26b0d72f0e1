package toolcache

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"
)

// Progress is one notifications/progress a server sent about a call in
// progress (MCP: progress grows with each report; total, when the
// server knows it, is where it ends; message says what is going on).
type Progress struct {
	Progress float64
	Total    float64 // 0: unknown
	Message  string
}

type progressKey struct{}

// WithProgress returns a context whose tool call (View.CallTool and the
// like) asks its server for progress reports, a progressToken in the
// request's _meta, and hands each report to f, its strings with the
// server's secrets masked. f runs on the session's reading goroutine,
// before the call's result is read: it must not block. Servers are free
// not to report.
func WithProgress(ctx context.Context, f func(Progress)) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

func progressFrom(ctx context.Context) func(Progress) {
	f, _ := ctx.Value(progressKey{}).(func(Progress))
	return f
}

// progressRoutes are a session's calls that asked for progress, by their
// token; the token is unique in the session, which is where a server's
// notifications come from.
type progressRoutes struct {
	next atomic.Uint64
	m    sync.Map // token (string) -> func(Progress)
}

// add registers f and returns its token and the function that removes it.
func (r *progressRoutes) add(f func(Progress)) (string, func()) {
	tok := "jetagent-" + strconv.FormatUint(r.next.Add(1), 10)
	r.m.Store(tok, f)
	return tok, func() { r.m.Delete(tok) }
}

// deliver hands a notifications/progress to its call, if it still runs.
func (r *progressRoutes) deliver(n mcp.JSONRPCNotification) {
	p := n.Params.AdditionalFields
	tok, _ := p["progressToken"].(string)
	v, ok := r.m.Load(tok)
	if !ok {
		return // not ours, or the call has returned
	}
	pr := Progress{Progress: number(p["progress"]), Total: number(p["total"])}
	pr.Message, _ = p["message"].(string)
	v.(func(Progress))(pr)
}

// number is a notification's number: float64 when it came as JSON, the
// Go type the server used over the in-process transport.
func number(v any) float64 {
	switch n := v.(type) {
	case float64:
		return n
	case float32:
		return float64(n)
	case int:
		return float64(n)
	case int64:
		return float64(n)
	case int32:
		return float64(n)
	case uint64:
		return float64(n)
	case json.Number:
		f, _ := n.Float64()
		return f
	}
	return 0
}
