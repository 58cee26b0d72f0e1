package agentloop_test

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// progressMCPServer's tool crawl(n) reports progress 1..n of n
// ("page i") when asked, waiting for each of the first acked reports to
// be taken from ack (mcp-go's server sends notifications apart from the
// response: otherwise a report can come after the result), then answers.
func progressMCPServer(ack <-chan struct{}, acked int) *server.MCPServer {
	s := server.NewMCPServer("crawler", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewToolWithRawSchema("crawl", "Crawl n pages.", json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := int(req.GetFloat("n", 0))
			m := req.Params.Meta
			for i := 1; m != nil && m.ProgressToken != nil && i <= n; i++ {
				if err := sendProgress(ctx, m.ProgressToken, map[string]any{"progress": i, "total": n, "message": "page " + string(rune('0'+i%10))}, ack, i <= acked); err != nil {
					return nil, err
				}
			}
			return mcp.NewToolResultText("crawled"), nil
		})
	return s
}

// sendProgress sends a progress report of the call's token with fields
// and, with wait, waits for it to be taken from ack (mcp-go's server
// sends notifications apart from the response).
func sendProgress(ctx context.Context, token mcp.ProgressToken, fields map[string]any, ack <-chan struct{}, wait bool) error {
	p := map[string]any{"progressToken": token}
	for k, v := range fields {
		p[k] = v
	}
	_ = server.ServerFromContext(ctx).SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), p)
	if !wait {
		return nil
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A tool's progress reports are tool.progress events of its call, in
// order and before its tool.result: for a direct call, and for an inner
// call of a script (with from and parent_call_id); a call reporting
// more than 100 times publishes the first 100.
func TestToolProgressEvents(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		mode   agentloop.Mode
		reply  llmtest.Reply
		pages  int
		events int
		inner  bool
	}{
		{"direct call", agentloop.ModeFull, toolReply(call("crawl", `{"n":3}`)), 3, 3, false},
		{"from code", agentloop.ModeCode, toolReply(call(agentloop.ToolExecuteCode, `{"code":"await tools.crawl({n: 2})"}`)), 2, 2, true},
		{"at most 100", agentloop.ModeFull, toolReply(call("crawl", `{"n":150}`)), 150, 100, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ack := make(chan struct{})
			tools := inProcessView(t, nil, map[string]*server.MCPServer{"web": progressMCPServer(ack, 100)})
			s := llmtest.NewServer(t, tt.reply, textReply("done"))
			var mu sync.Mutex
			var evs []agentloop.Event
			sink := agentloop.SinkFunc(func(_ context.Context, e agentloop.Event) {
				mu.Lock()
				evs = append(evs, e)
				mu.Unlock()
				if e.Type == agentloop.EventToolProgress {
					ack <- struct{}{}
				}
			})
			if _, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), agentloop.Input{JobID: "j", Task: "crawl", Tools: tools, Mode: tt.mode, Sink: sink}); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			var progress []float64
			var callID string
			for _, e := range evs {
				switch {
				case e.Type == agentloop.EventToolCall && e.Data["name"] == "crawl":
					callID, _ = e.Data["call_id"].(string)
				case e.Type == agentloop.EventToolProgress:
					if e.Data["call_id"] != callID || e.Data["tool"] != "crawl" || e.Data["total"] != float64(tt.pages) {
						t.Errorf("progress event %v, want call %s of crawl, total %d", e.Data, callID, tt.pages)
					}
					if tt.inner && (e.Data["from"] != agentloop.ToolExecuteCode || e.Data["parent_call_id"] == nil) {
						t.Errorf("inner call's progress %v without from and parent_call_id", e.Data)
					}
					progress = append(progress, e.Data["progress"].(float64))
				case e.Type == agentloop.EventToolResult && e.Data["name"] == "crawl":
					if len(progress) != tt.events {
						t.Errorf("tool.result after %d progress events, want %d", len(progress), tt.events)
					}
				}
			}
			want := make([]float64, tt.events)
			for i := range want {
				want[i] = float64(i + 1)
			}
			if !reflect.DeepEqual(progress, want) {
				t.Errorf("progress %v, want %v", progress, want)
			}
		})
	}
}
