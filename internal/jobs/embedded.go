package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
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

	// User and Password, or Token, are what clients must present (the
	// NATS_USER/NATS_PASSWORD/NATS_TOKEN they connect with). Empty: no
	// authentication, allowed only on a loopback Listen address.
	User, Password, Token string
	// Cert and Key (PEM files) make the server require TLS of network
	// clients; with ClientCA, clients must also present a certificate it
	// signed (mutual TLS, which counts as authentication). In-process
	// connections need no TLS.
	Cert, Key, ClientCA string

	// Logger receives the server's warnings (at Warn), errors (at Error)
	// and notices (at Debug: a healthy start is quiet); the server's debug
	// and trace are off. Nil: the server logs nothing. Either way a
	// failure to start is StartEmbedded's error, with the server's reason.
	Logger *slog.Logger
	// ReadyTimeout bounds the wait for the server to accept connections
	// (0: 10 s).
	ReadyTimeout time.Duration
	// MaxStore bounds the bytes the JetStream store may hold (0:
	// nats-server's default, 75% of the disk space free under DataDir
	// when the server starts, fixed until it restarts).
	MaxStore int64
}

// ErrOpenListen is returned by StartEmbedded for a listen address beyond
// loopback without any client authentication.
var ErrOpenListen = errors.New("embedded NATS would accept unauthenticated clients from the network")

// Open reports whether clients need not prove who they are (no user
// with a password, no token, no client certificate verification). A user
// without a password proves nothing: any client giving the name gets in
// (StartEmbedded refuses that configuration).
func (c EmbeddedConfig) Open() bool {
	return (c.User == "" || c.Password == "") && c.Token == "" && (c.Cert == "" || c.ClientCA == "")
}

// AuthMode names how clients authenticate, for logs.
func (c EmbeddedConfig) AuthMode() string {
	var m []string
	switch {
	case c.User != "":
		m = append(m, "user/password")
	case c.Token != "":
		m = append(m, "token")
	}
	switch {
	case c.Cert != "" && c.ClientCA != "":
		m = append(m, "mutual TLS")
	case c.Cert != "":
		m = append(m, "TLS")
	}
	if len(m) == 0 {
		return "none"
	}
	return strings.Join(m, " + ")
}

// LoopbackListen reports whether a host:port listen address is reachable
// from this machine only: "localhost" or a loopback IP. An empty host or a
// name that is not localhost counts as reachable from the network.
func LoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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
		NoLog:      true, // logs go to cfg.Logger (serverLog)
		// Seven lines of ASCII art in a debug log.
		DisableJetStreamBanner: true,
	}
	if opts.ServerName == "" {
		opts.ServerName = "jetagent"
	}
	if cfg.MaxStore < 0 {
		return nil, fmt.Errorf("%w: embedded NATS: MaxStore %d is negative", ErrConfig, cfg.MaxStore)
	}
	opts.JetStreamMaxStore = cfg.MaxStore
	if opts.MaxPayload == 0 {
		opts.MaxPayload = 8 << 20
	}
	if err := cfg.applyAuth(opts); err != nil {
		return nil, err
	}
	if cfg.Listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := net.SplitHostPort(cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("%w: listen address %q: %w", ErrConfig, cfg.Listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p < 0 || p > 65535 {
			return nil, fmt.Errorf("%w: listen address %q: bad port", ErrConfig, cfg.Listen)
		}
		if !LoopbackListen(cfg.Listen) && cfg.Open() {
			return nil, fmt.Errorf("%w: %s is not a loopback address; configure a user and password, a token "+
				"or mutual TLS, or listen on 127.0.0.1", ErrOpenListen, cfg.Listen)
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
	sl := &serverLog{log: cfg.Logger}
	s.SetLoggerV2(sl, false, false, false)
	wait := cfg.ReadyTimeout
	if wait <= 0 {
		wait = 10 * time.Second
	}
	// Start returns once it failed (JetStream could not use its store,
	// the port could not be listened on): the server logs why as fatal
	// and, with nothing listening, would only stay unready for the whole
	// wait.
	s.Start()
	fatal := sl.fatal()
	if fatal == "" && !s.ReadyForConnections(wait) {
		fatal = fmt.Sprintf("did not start listening on %s within %s", cfg.Listen, wait)
		if f := sl.fatal(); f != "" {
			fatal = f
		}
	}
	if fatal != "" {
		if strings.Contains(fatal, "JetStream") {
			// nats-server does not name the directory it found unusable.
			fatal += " (JetStream store " + filepath.Join(cfg.DataDir, server.JetStreamStoreDir) + ")"
		}
		s.Shutdown()
		s.WaitForShutdown()
		unlock()
		return nil, fmt.Errorf("embedded NATS: %s", fatal)
	}
	go func() { s.WaitForShutdown(); unlock() }()
	warnSmallStore(s, cfg, sl)
	return s, nil
}

// MinStoreRoom is the room left in the embedded JetStream store below
// which StartEmbedded warns (with MaxStore set, a tenth of it when that
// is less): a few hundred jobs with their events and transcripts.
const MinStoreRoom = 256 << 20

// warnSmallStore says at start when the store is nearly full. nats-server
// fixes its limit at start from the disk's free space, so a worker
// started on a nearly full disk refuses jobs ("insufficient storage
// resources") even once space is freed, until it restarts; the refusal
// alone does not say that.
func warnSmallStore(s *server.Server, cfg EmbeddedConfig, sl *serverLog) {
	if sl.log == nil {
		return
	}
	info, err := s.Jsz(nil)
	if err != nil || info.Config.MaxStore <= 0 {
		return
	}
	room := info.Config.MaxStore - int64(info.Store)
	limit := int64(MinStoreRoom)
	if cfg.MaxStore > 0 {
		limit = min(limit, cfg.MaxStore/10) // a small limit chosen is nearly full only at its end
	}
	if room >= limit {
		return
	}
	why := "nats-server limits it to 75% of the disk space free under the data directory when it starts, until it restarts: " +
		"free disk space and restart the worker, or set JETAGENT_MAX_STORE"
	if cfg.MaxStore > 0 {
		why = "the limit set (JETAGENT_MAX_STORE)"
	}
	sl.log.Warn("embedded NATS: the JetStream store is nearly full: when it is, jobs are refused",
		"room_bytes", max(room, 0), "max_store_bytes", info.Config.MaxStore, "used_bytes", info.Store,
		"data_dir", cfg.DataDir, "why", why)
}

// serverLog is nats-server's Logger over a *slog.Logger (nil: nothing is
// logged). It keeps the first fatal message, which nats-server's own
// loggers would exit the process on: the reason a start failed.
type serverLog struct {
	log *slog.Logger

	mu        sync.Mutex
	fatalText string
}

// quiet are warnings an operator of the worker cannot act on, logged at
// Debug: NATS_PASSWORD is also the in-process client's password, so it
// cannot be a bcrypt hash.
var quiet = []string{"Plaintext passwords detected"}

func (l *serverLog) at(level slog.Level, format string, v []any) {
	if l.log == nil {
		return
	}
	msg := fmt.Sprintf(format, v...)
	if level == slog.LevelWarn && slices.ContainsFunc(quiet, func(q string) bool { return strings.HasPrefix(msg, q) }) {
		level = slog.LevelDebug
	}
	l.log.Log(context.Background(), level, "embedded NATS: "+msg)
}

// fatal returns the first fatal message, or "".
func (l *serverLog) fatal() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatalText
}

func (l *serverLog) Noticef(format string, v ...any) { l.at(slog.LevelDebug, format, v) }
func (l *serverLog) Warnf(format string, v ...any)   { l.at(slog.LevelWarn, format, v) }
func (l *serverLog) Errorf(format string, v ...any)  { l.at(slog.LevelError, format, v) }
func (l *serverLog) Debugf(format string, v ...any)  {}
func (l *serverLog) Tracef(format string, v ...any)  {}

func (l *serverLog) Fatalf(format string, v ...any) {
	l.mu.Lock()
	if l.fatalText == "" {
		l.fatalText = fmt.Sprintf(format, v...)
	}
	l.mu.Unlock()
	l.at(slog.LevelError, format, v)
}

// Validate checks the authentication and TLS settings of c as given (a
// listen address beyond loopback without authentication is StartEmbedded's
// ErrOpenListen). Errors wrap ErrConfig.
func (c EmbeddedConfig) Validate() error {
	switch {
	case c.Token != "" && (c.User != "" || c.Password != ""):
		return fmt.Errorf("%w: embedded NATS: a token and a user/password are exclusive", ErrConfig)
	case c.User == "" && c.Password != "":
		return fmt.Errorf("%w: embedded NATS: a password needs a user", ErrConfig)
	case c.User != "" && c.Password == "":
		// nats-server would let in any client giving the name, also on
		// a listen address beyond loopback.
		return fmt.Errorf("%w: embedded NATS: user %q has no password, so any client giving that name would get in: "+
			"set a password too, or use a token", ErrConfig, c.User)
	case (c.Cert == "") != (c.Key == ""):
		return fmt.Errorf("%w: embedded NATS: a TLS certificate and key go together", ErrConfig)
	case c.ClientCA != "" && c.Cert == "":
		return fmt.Errorf("%w: embedded NATS: verifying client certificates needs the server's own certificate and key", ErrConfig)
	}
	return nil
}

// applyAuth sets the server's client authentication and TLS.
func (c EmbeddedConfig) applyAuth(opts *server.Options) error {
	if err := c.Validate(); err != nil {
		return err
	}
	opts.Username, opts.Password, opts.Authorization = c.User, c.Password, c.Token
	if c.Cert == "" {
		return nil
	}
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: c.Cert, KeyFile: c.Key, CaFile: c.ClientCA, Verify: c.ClientCA != "",
	})
	if err != nil {
		return fmt.Errorf("%w: embedded NATS TLS: %w", ErrConfig, err)
	}
	opts.TLSConfig, opts.TLS, opts.TLSVerify = tc, true, c.ClientCA != ""
	opts.TLSTimeout = 5 // seconds, as nats-server's configuration file would default it
	return nil
}

// checkListen fails at once, saying why and what to do, when addr cannot
// be listened on: the server's own error names only the address.
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
	// moment after WaitForShutdown returns: allow it that moment, trying
	// again after 10 ms, growing to 50 ms, for at most lockWait.
	err = backoff.Retry(func() error { return lockFile(f) }, backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(lockWait/200),
		backoff.WithMaxInterval(lockWait/40),
		backoff.WithMaxElapsedTime(lockWait),
	))
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("embedded NATS data directory %s is in use by another running server (%v): "+
			"give each worker its own JETAGENT_DATA_DIR, or start more workers with NATS_URL pointing at the first", dir, err)
	}
	return func() { _ = f.Close() }, nil // closing releases the lock
}

// ConnectEmbedded opens an in-process connection to s, a server started
// with cfg, presenting cfg's user or token. In-process connections skip
// TLS, so the scheme is nats:// even when s.ClientURL says tls://.
func ConnectEmbedded(s *server.Server, cfg EmbeddedConfig, name string) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(name), nats.InProcessServer(s)}
	if cfg.User != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	url := strings.Replace(s.ClientURL(), "tls://", "nats://", 1)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to the embedded NATS in process: %w", err)
	}
	return nc, nil
}
