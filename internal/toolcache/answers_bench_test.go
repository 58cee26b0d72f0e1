package toolcache

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// BenchmarkMaskedLargeResult: a tool result of 1 MiB (as text, and as
// structured content with its text) through a pool whose config holds 10
// secrets, against a pool with none, and the masking alone
// (docs/BENCHMARKS.md, "Masking servers' answers"):
//
//	go test -run '^$' -bench MaskedLargeResult -benchtime 20x ./internal/toolcache/
func BenchmarkMaskedLargeResult(b *testing.B) {
	env := map[string]string{}
	var secrets []string
	for i := range 10 {
		v := fmt.Sprintf("sk-%02d-a1B2c3D4e5F6g7H8i9J0", i)
		env[fmt.Sprintf("KEY_%d_TOKEN", i)] = v
		secrets = append(secrets, v)
	}
	line := `{"path":"/srv/data/file-0001.txt","size":12345,"owner":"someone","note":"an ordinary line of output"},`
	rows := strings.Repeat(line, (1<<20)/len(line))
	doc := "[" + rows + `{"token":"` + secrets[3] + `"}]`
	var structured any
	if err := json.Unmarshal([]byte(doc), &structured); err != nil {
		b.Fatal(err)
	}
	srv := server.NewMCPServer("big", "1.0.0", server.WithToolCapabilities(false))
	srv.AddTool(mcp.NewTool("text", mcp.WithDescription("1 MiB of text.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(doc), nil
		})
	srv.AddTool(mcp.NewTool("structured", mcp.WithDescription("1 MiB as structured content and text.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultStructured(map[string]any{"rows": structured}, doc), nil
		})
	for _, n := range []int{0, 10} {
		cfg := Config{Servers: map[string]ServerConfig{}}
		if n > 0 { // the secrets of a server the calls never reach: the pool masks every server's
			cfg.Servers["other"] = ServerConfig{Command: "srv", Env: env, Disabled: true}
		}
		p, err := NewPool(context.Background(), cfg, WithInProcessServer("big", srv, ServerConfig{}), WithLogger(discardLogger()))
		if err != nil {
			b.Fatal(err)
		}
		if got := len(p.shown); n > 0 && got < n {
			b.Fatalf("%d patterns for %d secrets", got, n)
		}
		v, err := p.View("bench", nil, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, tool := range []string{"text", "structured"} {
			b.Run(fmt.Sprintf("call/%s/secrets=%d", tool, n), func(b *testing.B) {
				b.SetBytes(int64(len(doc)))
				for b.Loop() {
					res, err := v.CallTool(context.Background(), tool, json.RawMessage(`{}`))
					if err != nil || len(res.Text) < len(doc)-100 {
						b.Fatalf("%d bytes, %v", len(res.Text), err)
					}
					if n > 0 && strings.Contains(res.Text, secrets[3]) {
						b.Fatal("a secret shown")
					}
				}
			})
			if n > 0 {
				res, err := v.CallTool(context.Background(), tool, json.RawMessage(`{}`))
				if err != nil {
					b.Fatal(err)
				}
				raw, err := v.callTool(context.Background(), tool, json.RawMessage(`{}`))
				if err != nil || res.Text == raw.Text {
					b.Fatalf("not masked: %v", err)
				}
				b.Run("mask/"+tool, func(b *testing.B) {
					b.SetBytes(int64(len(raw.Text) + len(raw.Structured)))
					for b.Loop() {
						p.maskResult(raw)
					}
				})
			}
		}
		_ = v.Close()
		_ = p.Close()
	}
}
