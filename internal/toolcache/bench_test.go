package toolcache

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// Benchmarks (see docs/BENCHMARKS.md, section toolcache):
//
//	go test -run '^$' -bench . -benchtime 20x ./internal/toolcache/

type benchServer struct {
	name string
	cfg  func(b *testing.B) ServerConfig
	// echo is a cheap tool call on this server.
	tool string
	args string
}

var benchServers = []benchServer{
	{"mcpgo-stdio", func(b *testing.B) ServerConfig { return stdioTestServer("bench") }, "echo", `{"text":"hi"}`},
	{"mcpgo-ignores-discover", func(b *testing.B) ServerConfig { return stdioTestServer("nodiscover") }, "echo", `{"text":"hi"}`},
	{"npm-everything", func(b *testing.B) ServerConfig {
		return ServerConfig{Command: npmBin(b, "mcp-server-everything"), Args: []string{"stdio"}}
	}, "echo", `{"message":"hi"}`},
	{"npm-filesystem", func(b *testing.B) ServerConfig {
		return ServerConfig{Command: npmBin(b, "mcp-server-filesystem"), Args: []string{b.TempDir()}}
	}, "list_allowed_directories", `{}`},
	{"npm-memory", func(b *testing.B) ServerConfig {
		return ServerConfig{Command: npmBin(b, "mcp-server-memory"), Env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(b.TempDir(), "m.jsonl")}}
	}, "read_graph", `{}`},
}

func benchDialer() *dialer {
	return &dialer{logger: discardLogger(), clientInfo: mcp.Implementation{Name: "bench", Version: "0"}, connectTimeout: 30 * time.Second}
}

func benchConfig(b *testing.B, s benchServer) ServerConfig {
	b.Helper()
	cfg := s.cfg(b)
	if err := cfg.validate(); err != nil {
		b.Fatal(err)
	}
	return cfg
}

// Connect time: spawn + initialize + tools/list, as the pool does it
// (protocol 2025-11-25, no server/discover probe).
func BenchmarkConnect(b *testing.B) {
	for _, s := range benchServers {
		b.Run(s.name, func(b *testing.B) {
			cfg := benchConfig(b, s)
			d := benchDialer()
			ctx := context.Background()
			for b.Loop() {
				sess, err := d.dial(ctx, s.name, cfg, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := sess.listTools(ctx); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				_ = sess.close()
				b.StartTimer()
			}
		})
	}
}

// Connect time with mcp-go's defaults: protocol 2026-07-28 first probes
// server/discover; a server that answers "method not found" costs one extra
// round trip, one that ignores the probe costs the probe's 5 s timeout.
func BenchmarkConnectMCPGoDefault(b *testing.B) {
	for _, s := range benchServers {
		b.Run(s.name, func(b *testing.B) {
			cfg := benchConfig(b, s)
			ctx := context.Background()
			for b.Loop() {
				c, err := client.NewStdioMCPClient(cfg.Command, envList(cfg.Env), cfg.Args...)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
					b.Fatal(err)
				}
				if _, err := c.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				_ = c.Close()
				b.StartTimer()
			}
		})
	}
}

// Pooled call round trip (View.CallTool on the shared session) against a
// bare mcp-go client's CallTool on its own session to the same kind of
// server, interleaved in one loop so both see the same machine load; the
// "pool/bare" metric is the ratio.
func BenchmarkCallRoundTrip(b *testing.B) {
	for _, s := range []benchServer{benchServers[0], benchServers[2]} {
		b.Run(s.name, func(b *testing.B) {
			cfg := benchConfig(b, s)
			ctx := context.Background()
			p, err := NewPool(ctx, Config{Servers: map[string]ServerConfig{"s": cfg}}, WithLogger(discardLogger()))
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			v, err := p.View("bench", nil, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer v.Close()
			bare, err := client.NewStdioMCPClient(cfg.Command, envList(cfg.Env), cfg.Args...)
			if err != nil {
				b.Fatal(err)
			}
			defer bare.Close()
			bareClient := client.NewClient(bare.GetTransport(), client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
			if _, err := bareClient.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
				b.Fatal(err)
			}
			var argMap map[string]any
			_ = json.Unmarshal([]byte(s.args), &argMap)
			req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: s.tool, Arguments: argMap}}
			args := json.RawMessage(s.args)
			var pooled, direct time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, err := v.CallTool(ctx, s.tool, args); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := bareClient.CallTool(ctx, req); err != nil {
					b.Fatal(err)
				}
				pooled += t1.Sub(t0)
				direct += time.Since(t1)
			}
			n := float64(b.N)
			b.ReportMetric(float64(pooled.Microseconds())/n, "pool-µs/call")
			b.ReportMetric(float64(direct.Microseconds())/n, "bare-µs/call")
			b.ReportMetric(float64(pooled)/float64(direct), "pool/bare")
		})
	}
}

// Spawn-per-call: what a call costs without a pool (spawn, initialize, one
// tools/call, close).
func BenchmarkSpawnPerCall(b *testing.B) {
	for _, s := range []benchServer{benchServers[0], benchServers[2]} {
		b.Run(s.name, func(b *testing.B) {
			cfg := benchConfig(b, s)
			d := benchDialer()
			ctx := context.Background()
			for b.Loop() {
				sess, err := d.dial(ctx, s.name, cfg, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := sess.callTool(ctx, s.tool, json.RawMessage(s.args)); err != nil {
					b.Fatal(err)
				}
				_ = sess.close()
			}
		})
	}
}

// Registry search over the 527-tool LiveMCPBench catalog plus GitHub's 85.
func BenchmarkSearch(b *testing.B) {
	var lists [][]Tool
	for _, name := range []string{"livemcptool-70servers", "github-mcp-server-all"} {
		_, tools, err := LoadCatalog(catalogPath(b, name))
		if err != nil {
			b.Skip(err)
		}
		lists = append(lists, tools)
	}
	r := NewRegistry(lists...)
	r.Search("warm", 1)
	for b.Loop() {
		r.Search("list open pull requests in a repository", 5)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
