package toolcache

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.uber.org/goleak"
)

// testServerEnv makes the test binary run as a stdio MCP server: tests spawn
// os.Args[0] with it set, so the stdio server is real mcp-go code in a real
// child process without a separate build step.
const testServerEnv = "TOOLCACHE_TEST_SERVER"

func TestMain(m *testing.M) {
	if name := os.Getenv(testServerEnv); name != "" {
		os.Exit(serveStdio(name))
	}
	if mode := os.Getenv(hostileServerEnv); mode != "" {
		os.Exit(serveHostile(mode))
	}
	// regexp2's clock, which codemode's match bound starts, stops by
	// itself a second after the last match's deadline (30 s on).
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/dlclark/regexp2/v2.runClock"))
}

// dropPingsEnv makes the stdio test server leave pings unanswered: "all", or
// how many of the first pings to drop. Such a server also has the tool
// ticker(id), which notifies test/tick{id} every 20 ms until cancelled.
const dropPingsEnv = "TOOLCACHE_TEST_DROP_PINGS"

// serveStdio runs the test server on stdin/stdout. A server named
// "nodiscover..." behaves like servers that predate protocol 2026-07-28 and
// ignore requests they do not know: it never answers server/discover, which
// it reports through its saw_discover tool. With dropPingsEnv set it does not
// answer pings.
func serveStdio(name string) int {
	serverName := name
	if name == "secrets" { // a server that names itself by its token
		serverName += " " + os.Getenv("GITHUB_TOKEN")
	}
	s := newTestMCPServer(serverName)
	if name == "env" || name == "secrets" {
		s.AddTool(mcp.NewTool("environ", mcp.WithDescription("The server's environment, one VAR=value a line.")),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(strings.Join(os.Environ(), "\n")), nil
			})
	}
	if name == "secrets" {
		addEnvironTools(s)
	}
	var in io.Reader = os.Stdin
	var sawDiscover atomic.Bool
	drop := -1 // pings left to drop; -1: none
	if v := os.Getenv(dropPingsEnv); v == "all" {
		drop = math.MaxInt
	} else if n, err := strconv.Atoi(v); err == nil {
		drop = n
	}
	if drop > 0 {
		s.AddTool(mcp.NewTool("ticker", mcp.WithDescription("Notify test/tick every 20 ms until cancelled."),
			mcp.WithString("id", mcp.Required())),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				id := req.GetString("id", "")
				t := time.NewTicker(20 * time.Millisecond)
				defer t.Stop()
				for {
					select {
					case <-ctx.Done():
						return nil, ctx.Err()
					case <-t.C:
						_ = s.SendNotificationToClient(ctx, "test/tick", map[string]any{"id": id})
					}
				}
			})
	}
	if strings.HasPrefix(name, "nodiscover") || drop > 0 {
		nodiscover := strings.HasPrefix(name, "nodiscover")
		pr, pw := io.Pipe()
		go func() {
			sc := bufio.NewScanner(os.Stdin)
			sc.Buffer(make([]byte, 1<<20), 1<<24)
			for sc.Scan() {
				if nodiscover && strings.Contains(sc.Text(), `"server/discover"`) {
					sawDiscover.Store(true)
					continue
				}
				if drop > 0 && strings.Contains(sc.Text(), `"method":"ping"`) {
					drop--
					continue
				}
				if _, err := fmt.Fprintln(pw, sc.Text()); err != nil {
					return
				}
			}
			pw.Close()
		}()
		in = pr
	}
	s.AddTool(mcp.NewTool("saw_discover", mcp.WithDescription("Whether a server/discover probe arrived.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(strconv.FormatBool(sawDiscover.Load())), nil
		})
	srv := server.NewStdioServer(s)
	server.WithWorkerPoolSize(100)(srv)
	server.WithQueueSize(1000)(srv)
	if err := srv.Listen(context.Background(), in, os.Stdout); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// newTestMCPServer is the mcp-go server every transport test talks to.
//
//	echo(text)          returns text
//	pid()               returns the server's process id
//	slow(id)            notifies test/started{id}, then blocks until cancelled
//	                    (then notifies test/cancelled{id}) or 60 s pass; a
//	                    server in the test process also reports both to its
//	                    serverWatch (see watchedTestMCPServer)
//	barrier(n)          returns once n barrier calls are in flight at once
//	add_tool(name)      adds a tool, which makes the server send
//	                    notifications/tools/list_changed
//
// plus a resource test://hello and a template test://item/{id}.
func newTestMCPServer(name string) *server.MCPServer { return watchedTestMCPServer(name, nil) }

// watchedTestMCPServer is newTestMCPServer reporting its slow calls to w
// (which may be nil).
func watchedTestMCPServer(name string, w *serverWatch) *server.MCPServer {
	s := server.NewMCPServer(name, "1.0.0",
		server.WithToolCapabilities(true),
		server.WithResourceCapabilities(false, true))
	s.AddTool(mcp.NewTool("echo", mcp.WithDescription("Echo the text back."),
		mcp.WithString("text", mcp.Required(), mcp.Description("text to echo"))),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(req.GetString("text", "")), nil
		})
	s.AddTool(mcp.NewTool("pid", mcp.WithDescription("Process id of the server.")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(strconv.Itoa(os.Getpid())), nil
		})
	s.AddTool(mcp.NewTool("slow", mcp.WithDescription("Block until cancelled."),
		mcp.WithString("id", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			id := req.GetString("id", "")
			_ = s.SendNotificationToClient(ctx, "test/started", map[string]any{"id": id})
			w.report("started", id)
			select {
			case <-ctx.Done():
				_ = s.SendNotificationToClient(context.WithoutCancel(ctx), "test/cancelled", map[string]any{"id": id})
				w.report("cancelled", id)
				return nil, ctx.Err()
			case <-time.After(60 * time.Second):
				return mcp.NewToolResultText("slept"), nil
			}
		})
	var mu sync.Mutex
	var inFlight int
	var full = make(chan struct{})
	var maxSeen atomic.Int64
	s.AddTool(mcp.NewTool("barrier", mcp.WithDescription("Return once n calls are in flight."),
		mcp.WithNumber("n", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := int(req.GetFloat("n", 1))
			mu.Lock()
			inFlight++
			if int64(inFlight) > maxSeen.Load() {
				maxSeen.Store(int64(inFlight))
			}
			if inFlight == n {
				close(full)
			}
			ch := full
			mu.Unlock()
			select {
			case <-ch:
				return mcp.NewToolResultText(strconv.FormatInt(maxSeen.Load(), 10)), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	s.AddTool(mcp.NewTool("add_tool", mcp.WithDescription("Add a tool named name."),
		mcp.WithString("name", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := req.GetString("name", "")
			s.AddTool(mcp.NewTool(n, mcp.WithDescription("Added at run time.")),
				func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.NewToolResultText(n), nil
				})
			return mcp.NewToolResultText("added " + n), nil
		})
	s.AddResource(mcp.NewResource("test://hello", "hello", mcp.WithMIMEType("text/plain")),
		func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: "test://hello", MIMEType: "text/plain", Text: "hello world"}}, nil
		})
	s.AddResourceTemplate(mcp.NewResourceTemplate("test://item/{id}", "item"),
		func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, Text: "item " + req.Params.URI}}, nil
		})
	return s
}
