package jobs

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedConfig configures the nats-server a worker runs when no external
// NATS is configured.
type EmbeddedConfig struct {
	// DataDir is the JetStream store directory (created if missing).
	DataDir string
	// Listen is host:port for clients ("127.0.0.1:4222"); port 0 picks a
	// free one. Empty means DontListen: in-process connections only.
	Listen string
	// MaxPayload of one message; 0 means 8 MiB, so the job size limit, not
	// the server's 1 MiB default, is what refuses large jobs.
	MaxPayload int32
	// ServerName names the server in monitoring (default "jetagent").
	ServerName string
}

// StartEmbedded starts a JetStream-enabled nats-server and waits until it
// accepts connections. The caller shuts it down with Shutdown and
// WaitForShutdown.
func StartEmbedded(cfg EmbeddedConfig) (*server.Server, error) {
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("%w: embedded NATS needs a data directory", ErrConfig)
	}
	opts := &server.Options{
		ServerName: cfg.ServerName,
		JetStream:  true,
		StoreDir:   cfg.DataDir,
		MaxPayload: cfg.MaxPayload,
		NoSigs:     true, // the worker owns signal handling
		NoLog:      true,
	}
	if opts.ServerName == "" {
		opts.ServerName = "jetagent"
	}
	if opts.MaxPayload == 0 {
		opts.MaxPayload = 8 << 20
	}
	if cfg.Listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := net.SplitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("%w: listen address %q: %v", ErrConfig, cfg.Listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 0 || p > 65535 {
			return nil, fmt.Errorf("%w: listen address %q: bad port", ErrConfig, cfg.Listen)
		}
		if p == 0 {
			p = server.RANDOM_PORT
		}
		opts.Host, opts.Port = host, p
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, fmt.Errorf("embedded NATS did not start listening on %s within 10s", cfg.Listen)
	}
	return s, nil
}
