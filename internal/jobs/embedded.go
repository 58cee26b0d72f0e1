package jobs

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
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
		} else if err := checkListen(cfg.Listen); err != nil {
			return nil, err
		}
		opts.Host, opts.Port = host, p
	}
	unlock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		s.WaitForShutdown()
		unlock()
		return nil, fmt.Errorf("embedded NATS did not start listening on %s within 10s", cfg.Listen)
	}
	go func() { s.WaitForShutdown(); unlock() }()
	return s, nil
}

// checkListen fails at once, saying why, when addr cannot be listened on:
// the server itself would only stay unready (its logs are off) until
// StartEmbedded gives up.
func checkListen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("embedded NATS cannot listen on %s: %w (if another worker's embedded NATS is there, "+
			"start this one with NATS_URL=nats://%s to join it)", addr, err, addr)
	}
	return ln.Close()
}

// lockWait is how long lockDataDir waits for a busy data directory.
const lockWait = 2 * time.Second

// lockDataDir takes an exclusive lock on the store directory for the
// server's life: two servers on one store would write over each other's
// JetStream files, and nats-server does not guard against it.
func lockDataDir(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("embedded NATS data directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "jetagent.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS data directory: %w", err)
	}
	// A server of this process that just shut down releases the lock a
	// moment after WaitForShutdown returns: allow it that moment.
	err = lockFile(f)
	for deadline := time.Now().Add(lockWait); err != nil && time.Now().Before(deadline); {
		time.Sleep(lockWait / 40)
		err = lockFile(f)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("embedded NATS data directory %s is in use by another running server (%v): "+
			"give each worker its own JETAGENT_DATA_DIR, or start more workers with NATS_URL pointing at the first", dir, err)
	}
	return func() { _ = f.Close() }, nil // closing releases the lock
}
