package toolcache

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// progressServer is an mcp-go server whose tool steps(n) reports
// progress 1..n of n (message "step i", with the secret it was given
// in the last one) when the call asked for it, each once the client
// took the one before from ack (mcp-go's servers send notifications
// apart from the response: without it, reports can come after the
// result, which nobody waits for), then answers; and whose tool token
// says whether a call carried a progress token.
func progressServer(secret string, ack <-chan struct{}) *server.MCPServer {
	s := server.NewMCPServer("progress", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("steps", mcp.WithNumber("n", mcp.Required())), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		n := int(req.GetFloat("n", 0))
		if m := req.Params.Meta; m != nil && m.ProgressToken != nil {
			for i := 1; i <= n; i++ {
				msg := "step " + string(rune('0'+i))
				if i == n {
					msg += " with " + secret
				}
				_ = server.ServerFromContext(ctx).SendNotificationToClient(ctx, string(mcp.MethodNotificationProgress), map[string]any{
					"progressToken": m.ProgressToken, "progress": i, "total": n, "message": msg,
				})
				select {
				case <-ack:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
		}
		return mcp.NewToolResultText("done"), nil
	})
	s.AddTool(mcp.NewTool("token"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		has := req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil
		b, _ := json.Marshal(has)
		return mcp.NewToolResultText(string(b)), nil
	})
	return s
}

// A call made with WithProgress gets its server's progress reports, in
// order and before its result, with the server's configured secrets
// masked; a call without asks for none. Over stdio (the npm reference
// server's long-running operation) and streamable HTTP (mcp-go).
func TestCallProgress(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-progress-token-value"
	ack := make(chan struct{})
	ts := httptest.NewServer(server.NewStreamableHTTPServer(progressServer(secret, ack), server.WithStateful(true)))
	t.Cleanup(func() { ts.CloseClientConnections(); ts.Close() })
	for _, tt := range []struct {
		name string
		cfg  ServerConfig
		tool string
		args any
		want []Progress
	}{
		{"stdio, npm server-everything", ServerConfig{Command: npmBin(t, "mcp-server-everything"), Args: []string{"stdio"}},
			"trigger-long-running-operation", map[string]any{"duration": 0.3, "steps": 3},
			[]Progress{{1, 3, ""}, {2, 3, ""}, {3, 3, ""}}},
		{"streamable HTTP, mcp-go", ServerConfig{URL: ts.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer " + secret}},
			"steps", map[string]any{"n": 3},
			[]Progress{{1, 3, "step 1"}, {2, 3, "step 2"}, {3, 3, "step 3 with xxxxx"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newTestPool(t, Config{Servers: map[string]ServerConfig{"s": tt.cfg}})
			v := newTestView(t, p, nil, nil, nil)
			var mu sync.Mutex
			var got []Progress
			ctx := WithProgress(context.Background(), func(pr Progress) {
				mu.Lock()
				got = append(got, pr)
				mu.Unlock()
				if tt.tool == "steps" {
					ack <- struct{}{}
				}
			})
			args, _ := json.Marshal(tt.args)
			res, err := v.CallTool(ctx, tt.tool, args)
			if err != nil || res.IsError {
				t.Fatalf("call: %v %+v", err, res)
			}
			mu.Lock()
			defer mu.Unlock()
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("progress %+v, want %+v", got, tt.want)
			}
		})
	}
	t.Run("not asked", func(t *testing.T) {
		t.Parallel()
		p := newTestPool(t, Config{Servers: map[string]ServerConfig{"s": {URL: ts.URL + "/mcp"}}})
		// token sends no progress: ack is not read.
		v := newTestView(t, p, nil, nil, nil)
		if res := call(t, v, "token", map[string]any{}); res.Text != "false" {
			t.Errorf("a call without WithProgress carried a progress token: %q", res.Text)
		}
		res, err := v.CallTool(WithProgress(context.Background(), func(Progress) {}), "token", json.RawMessage(`{}`))
		if err != nil || res.Text != "true" {
			t.Errorf("a call with WithProgress: %q %v", res.Text, err)
		}
	})
}
