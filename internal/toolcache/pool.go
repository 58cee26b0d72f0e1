package toolcache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jetagent/jetagent/internal/cfgerr"
	"github.com/jetagent/jetagent/internal/redact"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Server states reported by Status.
const (
	StateConnecting   = "connecting"
	StateReady        = "ready"
	StateReconnecting = "reconnecting"
	StateFailed       = "failed" // last attempt failed; retrying with backoff
	StateDisabled     = "disabled"
	StateClosed       = "closed"
)

// Defaults of the pool's Settings, declared once here.
const (
	DefaultConnectTimeout = 30 * time.Second
	DefaultHealthInterval = 30 * time.Second
	DefaultHealthMisses   = 3
	DefaultResyncInterval = 5 * time.Minute
	DefaultBackoffInitial = 250 * time.Millisecond
	DefaultBackoffMax     = 30 * time.Second
)

// MinInterval is the shortest HealthInterval and ResyncInterval taken
// (other than 0, off). A check waits at most the interval for its answer,
// so a HealthInterval of 1ns failed every ping and kept every server
// reconnecting; a ResyncInterval that short re-reads tools/list in a loop.
// Under a second is a slip (1ms for 1m), not a setting.
const MinInterval = time.Second

const (
	// listChangedGap is the least time between two tools/list re-reads that
	// notifications/tools/list_changed asks for: a server that sends
	// thousands a second gets a re-read twice a second, not a busy loop.
	listChangedGap = 500 * time.Millisecond
	// stableSession is how long a session must have lived for its death to
	// reset the backoff. A server that exits right after the handshake
	// would otherwise be respawned in a tight loop: each connect succeeds.
	stableSession = 5 * time.Second
)

// Settings are the pool's timings an operator may want to change. Start from
// DefaultSettings, set fields, and pass WithSettings; NewPool rejects invalid
// values with an error naming the field.
type Settings struct {
	// ConnectTimeout bounds one connection attempt: spawn or dial, the
	// handshake and the first tools/list; also one tools/list resync and
	// one server's resource listing (View.ListResources). > 0.
	ConnectTimeout time.Duration
	// HealthInterval is how often each shared session is checked (ping; on
	// 2026-07-28, server/discover). One check waits at most
	// min(HealthInterval, 10s). 0 disables health checks; else at least
	// MinInterval.
	HealthInterval time.Duration
	// HealthMisses is how many checks in a row may go unanswered before the
	// session is replaced (its process killed). A check that goes unanswered
	// while the server is answering other requests or sending notifications
	// does not count. >= 1.
	HealthMisses int
	// ResyncInterval is how often tool lists are re-read even without
	// notifications/tools/list_changed. 0 disables; else at least
	// MinInterval.
	ResyncInterval time.Duration
	// BackoffInitial and BackoffMax bound the exponential backoff between
	// failed connection attempts (retried forever). Both > 0, and
	// BackoffMax >= BackoffInitial.
	BackoffInitial time.Duration
	BackoffMax     time.Duration
}

// DefaultSettings are the settings NewPool uses unless told otherwise.
func DefaultSettings() Settings {
	return Settings{
		ConnectTimeout: DefaultConnectTimeout,
		HealthInterval: DefaultHealthInterval,
		HealthMisses:   DefaultHealthMisses,
		ResyncInterval: DefaultResyncInterval,
		BackoffInitial: DefaultBackoffInitial,
		BackoffMax:     DefaultBackoffMax,
	}
}

// Validate reports the first invalid field: a *cfgerr.FieldError wrapping
// ErrConfig, whose Fields name the Settings field (e.g. "HealthInterval").
func (s Settings) Validate() error { return s.validate(MinInterval) }

// validate is Validate with the shortest interval taken (tests: less).
func (s Settings) validate(minInterval time.Duration) error {
	field := func(name, format string, a ...any) error {
		return cfgerr.Field(ErrConfig, name, name, format, a...)
	}
	switch {
	case s.ConnectTimeout <= 0:
		return field("ConnectTimeout", "must be positive (got %s)", s.ConnectTimeout)
	case s.HealthInterval < 0:
		return field("HealthInterval", "must not be negative (got %s; 0 disables health checks)", s.HealthInterval)
	case s.HealthInterval > 0 && s.HealthInterval < minInterval:
		return field("HealthInterval", "must be 0 (off) or at least %s (got %s)", minInterval, s.HealthInterval)
	case s.HealthMisses < 1:
		return field("HealthMisses", "must be at least 1 (got %d)", s.HealthMisses)
	case s.ResyncInterval < 0:
		return field("ResyncInterval", "must not be negative (got %s; 0 disables resyncs)", s.ResyncInterval)
	case s.ResyncInterval > 0 && s.ResyncInterval < minInterval:
		return field("ResyncInterval", "must be 0 (off) or at least %s (got %s)", minInterval, s.ResyncInterval)
	case s.BackoffInitial <= 0:
		return field("BackoffInitial", "must be positive (got %s)", s.BackoffInitial)
	case s.BackoffMax < s.BackoffInitial:
		return cfgerr.Fields(ErrConfig, []string{"BackoffMax", "BackoffInitial"}, "BackoffMax",
			"must be at least BackoffInitial (got %s < %s)", s.BackoffMax, s.BackoffInitial)
	}
	return nil
}

// healthTimeout is how long one health check waits for its answer.
func (s Settings) healthTimeout() time.Duration { return min(10*time.Second, s.HealthInterval) }

// Option configures a Pool.
type Option func(*options)

type options struct {
	Settings
	logger     *slog.Logger
	clientInfo mcp.Implementation
	inproc     map[string]inprocServer
	notify     func(server string, n mcp.JSONRPCNotification)
	// healthHook sees every health check's outcome (tests).
	healthHook func(server string, ev healthEvent)
	// acquireHook runs when a call starts waiting for a server's session
	// (tests).
	acquireHook func(server string)
	// slotHook runs when a call starts waiting for a free slot of a
	// session (MaxConcurrent) (tests).
	slotHook func(server string)
	// shortIntervals takes health and resync intervals under MinInterval
	// (tests, which cannot wait seconds for a check).
	shortIntervals bool
}

// healthEvent is one health check's outcome.
type healthEvent struct {
	Err     error // nil: answered
	Counted bool  // the miss counted (nothing else was heard from the server)
	Misses  int   // unanswered checks in a row that counted
	Killed  bool  // the session was declared dead
}

// WithSettings replaces every setting (start from DefaultSettings).
func WithSettings(s Settings) Option { return func(o *options) { o.Settings = s } }

// WithLogger sets where connection events go (default: slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithClientInfo sets the clientInfo sent in initialize.
func WithClientInfo(name, version string) Option {
	return func(o *options) { o.clientInfo = mcp.Implementation{Name: name, Version: version} }
}

// WithHealthInterval sets Settings.HealthInterval (default 30s; 0 disables;
// else at least MinInterval).
func WithHealthInterval(d time.Duration) Option { return func(o *options) { o.HealthInterval = d } }

// WithHealthMisses sets Settings.HealthMisses (default 3).
func WithHealthMisses(n int) Option { return func(o *options) { o.HealthMisses = n } }

// WithResyncInterval sets Settings.ResyncInterval (default 5m; 0 disables;
// else at least MinInterval).
func WithResyncInterval(d time.Duration) Option { return func(o *options) { o.ResyncInterval = d } }

// WithConnectTimeout sets Settings.ConnectTimeout (default 30s).
func WithConnectTimeout(d time.Duration) Option { return func(o *options) { o.ConnectTimeout = d } }

// WithBackoff sets Settings.BackoffInitial and BackoffMax (default 250ms
// doubling up to 30s, forever).
func WithBackoff(initial, maxInterval time.Duration) Option {
	return func(o *options) { o.BackoffInitial, o.BackoffMax = initial, maxInterval }
}

type inprocServer struct {
	srv *server.MCPServer
	cfg ServerConfig
}

// WithInProcessServer adds an mcp-go server running in this process under
// name, with cfg's per-server options (Type is set to "inprocess").
func WithInProcessServer(name string, srv *server.MCPServer, cfg ServerConfig) Option {
	return func(o *options) {
		if o.inproc == nil {
			o.inproc = map[string]inprocServer{}
		}
		cfg.Type = TypeInProcess
		o.inproc[name] = inprocServer{srv, cfg}
	}
}

// WithNotificationHandler receives every notification servers send (after
// the pool has handled tools/list_changed). It runs on the transport's read
// goroutine: it must not block or call back into the pool.
func WithNotificationHandler(f func(server string, n mcp.JSONRPCNotification)) Option {
	return func(o *options) { o.notify = f }
}

// Pool holds one long-lived session per configured server (per-job servers
// get one for discovery, and one per View for calls), keeps the Registry up
// to date and reconnects broken sessions.
type Pool struct {
	opts     options
	dialer   *dialer
	conns    map[string]*serverConn
	names    []string // enabled servers, sorted
	disabled map[string]ServerConfig
	registry *Registry
	// secrets are the credentials the servers' URLs carry, taken out of
	// every error and log line (errorSecrets).
	secrets []string
	// shown are the credentials taken out of what servers answer: tool
	// results, resources, tool definitions, notifications (answerSecrets).
	shown []string

	ctx    context.Context // ends at Close: stops background loops
	cancel context.CancelFunc
	wg     sync.WaitGroup

	regMu sync.Mutex // serialises registry rebuilds

	mu     sync.Mutex
	closed bool
	views  map[*View]struct{}
}

// NewPool validates cfg and opens a session to every enabled server
// concurrently, waiting for each server's first attempt (bounded by ctx and
// the connect timeout). A server that fails is reported by Status and retried
// in the background with exponential backoff; it does not stop the others.
// Only an invalid configuration is an error.
func NewPool(ctx context.Context, cfg Config, opts ...Option) (*Pool, error) {
	o := options{
		Settings:   DefaultSettings(),
		logger:     slog.Default(),
		clientInfo: mcp.Implementation{Name: "jetagent", Version: "0"},
	}
	for _, opt := range opts {
		opt(&o)
	}
	minInterval := MinInterval
	if o.shortIntervals {
		minInterval = 0
	}
	if err := o.validate(minInterval); err != nil {
		return nil, err
	}
	all := map[string]ServerConfig{}
	for name, sc := range cfg.Servers {
		all[name] = sc
	}
	for _, name := range sortedKeys(o.inproc) { // of several clashes, the same one each run
		ip := o.inproc[name]
		if _, dup := all[name]; dup {
			return nil, fmt.Errorf("toolcache: server %q: configured twice (file and in-process)", name)
		}
		all[name] = ip.cfg
	}
	full := Config{Servers: all}
	if err := full.Validate(); err != nil {
		return nil, err
	}
	secrets := errorSecrets(full.Servers)
	if len(secrets) > 0 {
		o.logger = slog.New(scrubHandler{o.logger.Handler(), secrets})
	}
	pctx, cancel := context.WithCancel(context.Background())
	p := &Pool{
		secrets:  secrets,
		shown:    answerSecrets(full.Servers),
		opts:     o,
		conns:    map[string]*serverConn{},
		disabled: map[string]ServerConfig{},
		registry: newEmptyRegistry(),
		ctx:      pctx,
		cancel:   cancel,
		views:    map[*View]struct{}{},
	}
	p.dialer = &dialer{logger: slog.New(warnHandler{o.logger.Handler()}), clientInfo: o.clientInfo, connectTimeout: o.ConnectTimeout, notify: p.onNotification, secrets: secrets, slotHook: o.slotHook}
	for _, name := range sortedKeys(full.Servers) {
		sc := full.Servers[name]
		if sc.Disabled {
			p.disabled[name] = sc
			continue
		}
		p.names = append(p.names, name)
		p.conns[name] = newServerConn(p, name, sc, o.inproc[name].srv)
	}
	for _, name := range p.names {
		c := p.conns[name]
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			c.run()
		}()
	}
	for _, name := range p.names {
		select {
		case <-p.conns[name].firstDone:
		case <-ctx.Done():
			return p, nil // still connecting; Status says so
		}
	}
	return p, nil
}

// Registry is the catalog of every enabled server's tools.
func (p *Pool) Registry() *Registry { return p.registry }

// HasServer reports whether name is configured and not disabled.
func (p *Pool) HasServer(name string) bool {
	_, ok := p.conns[name]
	return ok
}

// Servers lists the enabled servers, sorted.
func (p *Pool) Servers() []string { return append([]string(nil), p.names...) }

// ServerStatus describes one configured server.
type ServerStatus struct {
	Name        string        `json:"name"`
	Type        string        `json:"type"`
	SessionMode string        `json:"sessionMode"`
	State       string        `json:"state"`
	Error       string        `json:"error,omitempty"`
	Since       time.Time     `json:"since"`
	Tools       int           `json:"tools"`
	Connects    int           `json:"connects"` // successful connections so far
	ConnectTime time.Duration `json:"connectTime,omitempty"`
	PID         int           `json:"pid,omitempty"` // of the shared session's child process
	Protocol    string        `json:"protocol,omitempty"`
	ServerName  string        `json:"serverName,omitempty"`
	ServerVer   string        `json:"serverVersion,omitempty"`
}

// Status reports every configured server, sorted by name.
func (p *Pool) Status() []ServerStatus {
	var out []ServerStatus
	for _, name := range p.names {
		st := p.conns[name].status()
		st.Error = redact.Text(st.Error, p.secrets)
		st.ServerName, st.ServerVer = p.maskText(st.ServerName), p.maskText(st.ServerVer)
		out = append(out, st)
	}
	for name, sc := range p.disabled {
		out = append(out, ServerStatus{Name: name, Type: sc.Type, SessionMode: sc.SessionMode, State: StateDisabled})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Close ends every session (shared and per-job) and waits for the child
// processes to exit. The pool cannot be used afterwards.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	views := make([]*View, 0, len(p.views))
	for v := range p.views {
		views = append(views, v)
	}
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait() // the run loops close their own sessions on the way out
	var errs []error
	for _, v := range views {
		errs = append(errs, v.Close())
	}
	return errors.Join(errs...)
}

// onNotification routes server notifications: tools/list_changed schedules
// a resync of that server (never a request here: this is the transport's
// read goroutine, which must keep reading for the answer to arrive).
func (p *Pool) onNotification(name string, s *session, n mcp.JSONRPCNotification) {
	if n.Method == string(mcp.MethodNotificationToolsListChanged) {
		if c := p.conns[name]; c != nil {
			c.requestResync()
		}
	}
	if n.Method == string(mcp.MethodNotificationProgress) && s != nil {
		s.progress.deliver(p.maskNotification(n))
	}
	if p.opts.notify != nil {
		p.opts.notify(name, p.maskNotification(n))
	}
}

// rebuild recomputes the registry from every server's current tool list.
func (p *Pool) rebuild() {
	p.regMu.Lock()
	defer p.regMu.Unlock()
	var all []Tool
	for _, name := range p.names {
		all = append(all, p.conns[name].currentTools()...)
	}
	assignNames(all)
	p.registry.replace(all)
}

// serverConn is the pool's state for one enabled server. Its run loop is the
// only goroutine that connects, resyncs and replaces the shared session.
type serverConn struct {
	p      *Pool
	name   string
	cfg    ServerConfig
	inproc *server.MCPServer

	firstDone chan struct{}
	resync    chan struct{} // buffered 1: coalesces list_changed bursts
	// leftOut is what the last "MCP tool definitions left out" warning
	// said (run loop only): the same definitions left out again at each
	// re-read (list_changed, up to twice a second; resyncs; reconnects)
	// are not logged again.
	leftOut string

	mu   sync.Mutex
	sess *session // current shared session; nil while (re)connecting
	// ready is closed when sess is set, and replaced when it dies; failed
	// is closed (and replaced) when a connection attempt fails, so that
	// calls waiting for that attempt give up with its error.
	ready    chan struct{}
	failed   chan struct{}
	state    string
	lastErr  error
	since    time.Time
	connects int
	tools    []Tool // allowed tools, Name == Original until rebuild names them
	hasTools bool
}

func newServerConn(p *Pool, name string, cfg ServerConfig, inproc *server.MCPServer) *serverConn {
	return &serverConn{
		p: p, name: name, cfg: cfg, inproc: inproc,
		firstDone: make(chan struct{}),
		resync:    make(chan struct{}, 1),
		ready:     make(chan struct{}),
		failed:    make(chan struct{}),
		state:     StateConnecting,
		since:     time.Now(),
	}
}

func (c *serverConn) requestResync() {
	select {
	case c.resync <- struct{}{}:
	default:
	}
}

func (c *serverConn) currentTools() []Tool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Tool(nil), c.tools...)
}

func (c *serverConn) status() ServerStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := ServerStatus{
		Name: c.name, Type: c.cfg.Type, SessionMode: c.cfg.SessionMode,
		State: c.state, Since: c.since, Tools: len(c.tools), Connects: c.connects,
	}
	if c.lastErr != nil && c.state != StateReady {
		st.Error = c.lastErr.Error()
	}
	if s := c.sess; s != nil {
		st.PID, st.ConnectTime, st.Protocol = s.pid, s.connectTime, s.protocol
		st.ServerName, st.ServerVer = s.info.Name, s.info.Version
	}
	return st
}

func (c *serverConn) setState(state string, err error) {
	c.mu.Lock()
	c.state, c.lastErr, c.since = state, err, time.Now()
	c.mu.Unlock()
}

// attemptFailed records a failed connection attempt and wakes the calls
// waiting for it.
func (c *serverConn) attemptFailed(err error) {
	c.mu.Lock()
	c.state, c.lastErr, c.since = StateFailed, err, time.Now()
	close(c.failed)
	c.failed = make(chan struct{})
	c.mu.Unlock()
}

// run connects, then serves resync and health ticks until the pool closes,
// reconnecting with backoff whenever the session dies.
func (c *serverConn) run() {
	log := c.p.opts.logger.With("mcp_server", c.name)
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = c.p.opts.BackoffInitial
	bo.MaxInterval = c.p.opts.BackoffMax
	bo.MaxElapsedTime = 0
	bo.Reset()
	var health, resync <-chan time.Time
	if d := c.p.opts.HealthInterval; d > 0 {
		t := time.NewTicker(d)
		defer t.Stop()
		health = t.C
	}
	if d := c.p.opts.ResyncInterval; d > 0 {
		t := time.NewTicker(d)
		defer t.Stop()
		resync = t.C
	}
	first := true
	var sess *session
	misses := 0 // health checks in a row that went unanswered (and counted)
	var connectedAt, lastSync time.Time
	var resyncLater <-chan time.Time // a rate-limited list_changed re-read
	flaps := 0                       // sessions in a row that died young
	defer func() {
		if sess != nil {
			_ = sess.close()
		}
		c.mu.Lock()
		c.sess, c.state, c.since = nil, StateClosed, time.Now()
		c.mu.Unlock()
		if first {
			close(c.firstDone)
		}
	}()
	for {
		if sess == nil {
			s, err := c.connect(c.p.ctx)
			if err != nil && c.p.ctx.Err() == nil {
				// Before firstDone: NewPool's caller sees the failure in Status.
				c.attemptFailed(err)
			}
			if first {
				first = false
				close(c.firstDone)
			}
			if err != nil {
				if c.p.ctx.Err() != nil {
					return
				}
				wait := bo.NextBackOff()
				log.Warn("MCP server connection failed", "err", err, "retry_in", wait)
				select {
				case <-time.After(wait):
					c.setState(StateReconnecting, err)
					continue
				case <-c.p.ctx.Done():
					return
				}
			}
			sess, misses, connectedAt = s, 0, time.Now()
			lastSync, resyncLater = connectedAt, nil
			log.Debug("MCP server connected", "connect_time", s.connectTime, "protocol", s.protocol, "pid", s.pid)
		}
		select {
		case <-c.p.ctx.Done():
			return
		case <-sess.dead:
			// Unpublish it here too: onDead may have run before connect set it.
			c.sessionDied(sess)
			_ = sess.close()
			// Only a session that lived resets the backoff; one that died
			// young counts as a failed attempt, but the first such death
			// reconnects at once (a single crash costs no wait).
			var wait time.Duration
			if time.Since(connectedAt) >= stableSession {
				bo.Reset()
				flaps = 0
			} else if flaps++; flaps > 1 {
				wait = bo.NextBackOff()
			}
			log.Warn("MCP session lost; reconnecting", "err", sess.deadErr, "retry_in", wait)
			sess = nil
			if wait > 0 {
				select {
				case <-time.After(wait):
				case <-c.p.ctx.Done():
					return
				}
			}
		case <-c.resync:
			// Rate-limited: see listChangedGap. One already scheduled
			// covers this one too.
			if resyncLater != nil {
				continue
			}
			if d := listChangedGap - time.Since(lastSync); d > 0 {
				resyncLater = time.After(d)
				continue
			}
			c.syncTools(sess, log)
			lastSync = time.Now()
		case <-resyncLater:
			resyncLater = nil
			c.syncTools(sess, log)
			lastSync = time.Now()
		case <-resync:
			c.syncTools(sess, log)
		case <-health:
			misses = c.checkHealth(sess, misses, log)
		}
	}
}

// checkHealth runs one health check on sess and returns the new count of
// unanswered checks in a row. A check that goes unanswered counts only when
// nothing else was heard from the server meanwhile: a server answering calls
// or sending notifications (progress of a long call) is alive, even if too
// busy for the check. The session is declared dead at HealthMisses.
func (c *serverConn) checkHealth(sess *session, misses int, log *slog.Logger) int {
	start := time.Now()
	ctx, cancel := context.WithTimeout(c.p.ctx, c.p.opts.healthTimeout())
	err := sess.healthCheck(ctx)
	cancel()
	if c.p.ctx.Err() != nil {
		return misses
	}
	ev := healthEvent{Err: err}
	switch {
	case err == nil:
		misses = 0
	case sess.isDead():
		// The check found the transport broken: the run loop reconnects.
	case sess.heardSince(start):
		misses = 0
	default:
		misses++
		ev.Counted = true
		if misses >= c.p.opts.HealthMisses {
			ev.Killed = true
			sess.markDead(fmt.Errorf("health check: %d in a row unanswered: %w", misses, err))
		} else {
			log.Warn("MCP health check unanswered", "err", err, "misses", misses, "limit", c.p.opts.HealthMisses)
		}
	}
	ev.Misses = misses
	if h := c.p.opts.healthHook; h != nil {
		h(c.name, ev)
	}
	return misses
}

// connect opens the shared session, reads its tools and publishes both.
func (c *serverConn) connect(ctx context.Context) (*session, error) {
	start := time.Now()
	s, err := c.p.dialer.dial(ctx, c.name, c.cfg, c.inproc)
	if err != nil {
		return nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, c.p.opts.ConnectTimeout)
	tools, skipped, err := s.listTools(lctx)
	cancel()
	if err != nil {
		_ = s.close()
		return nil, err
	}
	c.warnLeftOut(c.p.opts.logger.With("mcp_server", c.name), skipped)
	s.connectTime = time.Since(start) // spawn/dial + initialize + tools/list
	died := c.sessionDied
	s.onDead.Store(&died)
	c.mu.Lock()
	if s.isDead() {
		// It died before onDead was set (a server that exits right after
		// tools/list): publishing it would hand calls a dead session.
		c.mu.Unlock()
		err := fmt.Errorf("%w: %w%s%s", ErrSessionLost, s.deadErr, s.exitHint(exitHintWait), s.stderrHint())
		_ = s.close()
		return nil, err
	}
	c.sess = s
	c.state, c.lastErr, c.since = StateReady, nil, time.Now()
	c.connects++
	close(c.ready)
	c.mu.Unlock()
	c.setTools(tools)
	// A list_changed that arrived during the handshake was for a list we may
	// not have seen; a resync is cheap.
	return s, nil
}

// sessionDied unpublishes s at once, so calls wait for the next session
// instead of using a dead one. The run loop does the rest.
func (c *serverConn) sessionDied(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == s {
		c.sess = nil
		c.ready = make(chan struct{})
		c.state, c.lastErr, c.since = StateReconnecting, s.deadErr, time.Now()
	}
}

func (c *serverConn) syncTools(s *session, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(c.p.ctx, c.p.opts.ConnectTimeout)
	defer cancel()
	tools, skipped, err := s.listTools(ctx)
	if err != nil {
		log.Warn("MCP tools/list failed", "err", err)
		return
	}
	c.warnLeftOut(log, skipped)
	c.setTools(tools)
}

// warnLeftOut logs the tool definitions a tools/list left out, unless the
// last list left out the same ones. The first leftOutShown are named, each
// cut to leftOutEach bytes: a list of many bad tools, or of names of
// kilobytes, made one warning as large as the list (up to its 64 MiB).
func (c *serverConn) warnLeftOut(log *slog.Logger, skipped []error) {
	var said string
	if len(skipped) > 0 {
		lines := make([]string, 0, min(len(skipped), leftOutShown)+1)
		for _, err := range skipped[:min(len(skipped), leftOutShown)] {
			lines = append(lines, cut(err.Error(), leftOutEach))
		}
		if more := len(skipped) - leftOutShown; more > 0 {
			lines = append(lines, fmt.Sprintf("(and %d more)", more))
		}
		said = strings.Join(lines, "\n")
	}
	if said == c.leftOut {
		return
	}
	c.leftOut = said
	if said != "" {
		log.Warn("MCP tool definitions left out", "count", len(skipped), "err", said)
	}
}

// Bounds of the "MCP tool definitions left out" warning.
const (
	leftOutShown = 20
	leftOutEach  = 512
)

// setTools publishes a new tool list; the registry is rebuilt (and OnChange
// fired) only when something changed.
func (c *serverConn) setTools(tools []Tool) {
	c.p.maskTools(tools)
	c.mu.Lock()
	same := c.hasTools && reflect.DeepEqual(c.tools, tools)
	c.tools, c.hasTools = tools, true
	c.mu.Unlock()
	if !same {
		c.p.rebuild()
	}
}

// acquire returns the live shared session, waiting while one is being
// (re)connected; it fails fast while the server is failing, and as soon as
// the attempt it waits for fails: later attempts may fail for as long.
func (c *serverConn) acquire(ctx context.Context) (*session, error) {
	for {
		c.mu.Lock()
		s, ready, failed, state, lastErr := c.sess, c.ready, c.failed, c.state, c.lastErr
		c.mu.Unlock()
		switch {
		case s != nil:
			return s, nil
		case state == StateClosed:
			return nil, ErrClosed
		case state == StateFailed:
			return nil, fmt.Errorf("%w: server %q: %w", ErrServerUnavailable, c.name, lastErr)
		}
		if h := c.p.opts.acquireHook; h != nil {
			h(c.name)
		}
		select {
		case <-ready:
		case <-failed:
			c.mu.Lock()
			s, lastErr := c.sess, c.lastErr // another attempt may have begun, or even succeeded
			c.mu.Unlock()
			if s != nil {
				return s, nil
			}
			return nil, fmt.Errorf("%w: server %q: %w", ErrServerUnavailable, c.name, lastErr)
		case <-ctx.Done():
			return nil, fmt.Errorf("server %q: waiting for a session (%s): %w", c.name, state, ctx.Err())
		case <-c.p.ctx.Done():
			return nil, ErrClosed
		}
	}
}
