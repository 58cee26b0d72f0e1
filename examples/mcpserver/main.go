package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends, stdin closes (stdio), or the listener fails.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mcpserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	httpAddr := fs.String("http", "", "serve Streamable HTTP on this address (endpoint /mcp) instead of stdio")
	sseAddr := fs.String("sse", "", "serve the legacy HTTP+SSE transport on this address (endpoint /sse) instead of stdio")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *httpAddr != "" && *sseAddr != "" {
		return errors.New("-http and -sse are exclusive")
	}
	s := newServer()
	switch {
	case *httpAddr != "":
		h := server.NewStreamableHTTPServer(s)
		mux := http.NewServeMux()
		mux.Handle("/mcp", h)
		return serveHTTP(ctx, *httpAddr, "/mcp", mux, h, stderr)
	case *sseAddr != "":
		// The SSE server routes /sse and /message itself.
		h := server.NewSSEServer(s)
		return serveHTTP(ctx, *sseAddr, "/sse", h, h, stderr)
	default:
		stdio := server.NewStdioServer(s)
		// Protocol output owns stdout; the server's own log goes to stderr.
		stdio.SetErrorLogger(log.New(stderr, "mcpserver: ", log.LstdFlags))
		err := stdio.Listen(ctx, stdin, stdout)
		if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
}

// shutdowner is an MCP HTTP server that can close its sessions.
type shutdowner interface{ Shutdown(context.Context) error }

// serveHTTP listens first, so that the printed URL carries the real port
// when addr asks for port 0.
func serveHTTP(ctx context.Context, addr, path string, h http.Handler, mcp shutdowner, stderr io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "mcpserver: listening on http://%s%s\n", ln.Addr(), path)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = mcp.Shutdown(shutdownCtx) // ends open SSE streams, which would hold srv.Shutdown
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
