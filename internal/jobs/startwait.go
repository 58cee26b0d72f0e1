package jobs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/redact"
)

// Waiting for NATS at start. A worker is often started before its NATS
// server takes connections (docker compose or systemd ordering, a server
// restarting at that moment): ConnectWait and Run's first topology setup
// retry what a server coming up would fix, with an exponential backoff
// capped at startRetryMax, and give up at once on what it would not
// (credentials, TLS, an invalid URL, a server without JetStream).
const (
	startRetryInitial = 250 * time.Millisecond
	// startRetryMax is the longest delay between attempts: the backoff's
	// interval grows to 4 s, and its ±25% jitter stays within this.
	startRetryMax = 5 * time.Second
	// startLogEvery: one line at the first failure, then at most one per
	// this interval while the failures go on.
	startLogEvery = 10 * time.Second
)

// startBackOff is the delay between start attempts; it stops with ctx.
func startBackOff(ctx context.Context) backoff.BackOffContext {
	return backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(startRetryInitial),
		backoff.WithRandomizationFactor(0.25),
		backoff.WithMaxInterval(startRetryMax*4/5),
		backoff.WithMaxElapsedTime(0), // ctx bounds the wait
	), ctx)
}

// retryLog logs failed start attempts without a flood: the first at
// once, then one line per startLogEvery with the latest error and the
// attempts so far.
type retryLog struct {
	log      *slog.Logger
	msg      string
	attempts int
	logged   time.Time
	every    time.Duration
}

func newRetryLog(log *slog.Logger, msg string) *retryLog {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &retryLog{log: log, msg: msg, every: startLogEvery}
}

// failed is a backoff.Notify.
func (r *retryLog) failed(err error, next time.Duration) {
	r.attempts++
	if !r.logged.IsZero() && time.Since(r.logged) < r.every {
		return
	}
	r.logged = time.Now()
	r.log.Warn(r.msg, "err", err, "attempts", r.attempts, "next_in", next.Round(time.Millisecond))
}

// ConnectWait is Connect for a service that may start before its NATS
// server: while nothing accepts the connection (refused, a host name not
// resolving yet, a timeout, a server closing the connection) it tries
// again with backoff until it connects or ctx ends, logging the failures
// to log (nil: not logged) at most once per 10 s. Errors a server coming
// up would not fix end it at once: NATSConfig errors and unreadable or
// unparsable NATS_CREDS/NATS_CA/NATS_CERT/NATS_KEY files (checked before
// the first attempt), an authorization violation or expired credentials,
// a TLS failure (an untrusted certificate, a client certificate refused,
// TLS required on one side only) and an invalid URL. When ctx ends first,
// the error wraps context.Cause(ctx) and the last attempt's error.
func (c NATSConfig) ConnectWait(ctx context.Context, name string, log *slog.Logger, extra ...nats.Option) (*nats.Conn, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	servers := c.URL
	if servers == "" {
		servers = DefaultURL
	}
	shown := redactURLs(servers)
	if err := c.checkFiles(); err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", shown, err)
	}
	opts := append(c.Options(name), extra...)
	if err := c.checkCredentials(opts); err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", shown, err)
	}
	var last error
	retry := newRetryLog(log, fmt.Sprintf("NATS at %s not reachable; retrying", shown))
	nc, err := backoff.RetryNotifyWithData(func() (*nats.Conn, error) {
		nc, err := nats.Connect(servers, opts...)
		if err == nil {
			return nc, nil
		}
		err = withoutCredentials(err, servers) // logged and returned
		last = err
		if !connectRetryable(err) {
			return nil, backoff.Permanent(err)
		}
		return nil, err
	}, startBackOff(ctx), retry.failed)
	switch {
	case err == nil:
		if retry.attempts > 0 && log != nil {
			log.Info("NATS reachable", "url", nc.ConnectedUrlRedacted(), "failed_attempts", retry.attempts)
		}
		return nc, nil
	case ctx.Err() != nil && last != nil:
		return nil, fmt.Errorf("connect to NATS at %s: %w (last attempt: %w)", shown, context.Cause(ctx), last)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("connect to NATS at %s: %w", shown, context.Cause(ctx))
	}
	return nil, fmt.Errorf("connect to NATS at %s: %w%s", shown, err, connectHint(err))
}

// checkCredentials checks the TLS and credentials files as nats.go reads
// them, naming the variable: NATS_CREDS is read only once a server
// answers, so a file that does not parse would otherwise fail only after
// the server comes up. Then it applies every option once: an option that
// fails would fail every attempt.
func (c NATSConfig) checkCredentials(opts []nats.Option) error {
	for _, f := range []struct {
		set      bool
		variable string
		opt      nats.Option
	}{
		{c.CA != "", "NATS_CA=" + c.CA, nats.RootCAs(c.CA)},
		{c.Cert != "", "NATS_CERT=" + c.Cert + ", NATS_KEY=" + c.Key, nats.ClientCert(c.Cert, c.Key)},
		{c.Creds != "", "NATS_CREDS=" + c.Creds, nats.UserCredentials(c.Creds)},
	} {
		if !f.set {
			continue
		}
		o := nats.GetDefaultOptions()
		err := f.opt(&o)
		if err == nil && o.UserJWT != nil {
			_, err = o.UserJWT()
		}
		if err == nil && o.SignatureCB != nil {
			_, err = o.SignatureCB([]byte("jetagent-check"))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", f.variable, err)
		}
	}
	o := nats.GetDefaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return err
		}
	}
	return nil
}

// connectRetryable says whether a failed nats.Connect may succeed later
// with the same settings. Everything not known to be permanent is
// retried: a server that is starting, restarting or not yet resolvable
// fails in many ways, and each failure is logged.
func connectRetryable(err error) bool {
	var (
		alert     tls.AlertError
		record    tls.RecordHeaderError
		verify    *tls.CertificateVerificationError
		unknownCA x509.UnknownAuthorityError
		host      x509.HostnameError
		invalid   x509.CertificateInvalidError
		addr      *net.AddrError
		urlErr    *url.Error
		netErr    net.Error
		opErr     *net.OpError
	)
	for _, permanent := range []error{
		nats.ErrAuthorization, nats.ErrAuthExpired, nats.ErrAuthRevoked, nats.ErrAccountAuthExpired,
		nats.ErrPermissionViolation, nats.ErrSecureConnRequired, nats.ErrSecureConnWanted,
		nats.ErrNkeysNotSupported, nats.ErrNoUserCB, nats.ErrClientCertOrRootCAsRequired, nats.ErrBadTimeout,
	} {
		if errors.Is(err, permanent) {
			return false
		}
	}
	switch {
	case errors.As(err, &alert), errors.As(err, &record), errors.As(err, &verify),
		errors.As(err, &unknownCA), errors.As(err, &host), errors.As(err, &invalid):
		return false
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		return false // a TLS alert from the server ("tls: certificate required")
	case errors.Is(err, nats.ErrTLS):
		// A handshake cut short by a timeout may go through next time;
		// anything else about TLS would fail the same way.
		return errors.As(err, &netErr) && netErr.Timeout()
	case errors.As(err, &urlErr) && urlErr.Op == "parse", errors.As(err, &addr):
		return false // "nats://host:port:x", a port out of range
	}
	return true
}

// connectHint says what to check for an error ConnectWait gives up on.
func connectHint(err error) string {
	switch {
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired),
		errors.Is(err, nats.ErrAuthRevoked), errors.Is(err, nats.ErrAccountAuthExpired):
		return " (the server refused the credentials: check NATS_USER/NATS_PASSWORD, NATS_TOKEN or NATS_CREDS)"
	case connectRetryable(err):
		return ""
	case errors.Is(err, nats.ErrSecureConnRequired), errors.Is(err, nats.ErrSecureConnWanted):
		return " (TLS is set on one side only: NATS_CA/NATS_CERT here, the server's tls settings there, or a tls:// URL)"
	case strings.Contains(strings.ToLower(err.Error()), "tls"), strings.Contains(err.Error(), "x509"):
		return " (TLS failed: check NATS_CA, NATS_CERT and NATS_KEY against the server's TLS settings)"
	}
	return ""
}

// redactURLs is servers (comma-separated URLs) with any password replaced,
// for logs and errors. It works on the text: a URL that does not parse is
// quoted whole by nats.go's error (url.Parse's), and is redacted as well.
func redactURLs(servers string) string {
	parts := strings.Split(servers, ",")
	for i, p := range parts {
		parts[i] = redact.URL(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

// withoutCredentials is err with the userinfo of servers' URLs redacted
// in its text (a URL nats.go cannot parse is quoted whole). It still
// wraps err, for errors.Is and errors.As.
func withoutCredentials(err error, servers string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, p := range strings.Split(servers, ",") {
		if p = strings.TrimSpace(p); p != "" {
			msg = strings.ReplaceAll(msg, p, redact.URL(p))
		}
	}
	if msg == err.Error() {
		return err
	}
	return &redactedError{err: err, msg: msg}
}

type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// topologyRetryable says whether a failed first topology setup may
// succeed later: JetStream requests that went unanswered (the server
// away, restarting, or its cluster without a leader yet). A server without
// JetStream, a conflicting asset, a refused request or a closed
// connection would fail the same way again.
func topologyRetryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	for _, permanent := range []error{
		ErrTopology, ErrConfig, nats.ErrNoResponders, nats.ErrPermissionViolation, jetstream.ErrJetStreamNotEnabled,
		jetstream.ErrJetStreamNotEnabledForAccount, nats.ErrConnectionClosed,
	} {
		if errors.Is(err, permanent) {
			return false
		}
	}
	for _, transient := range []error{
		context.DeadlineExceeded, nats.ErrTimeout, nats.ErrDisconnected, nats.ErrConnectionReconnecting, nats.ErrNoServers,
	} {
		if errors.Is(err, transient) {
			return true
		}
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jsClusterNotAvailable
}

// jsClusterNotAvailable is the JetStream API's "JetStream system
// temporarily unavailable" (a cluster without a meta leader yet).
const jsClusterNotAvailable jetstream.ErrorCode = 10008

// ensureTopology is Run's first EnsureTopology, retried while JetStream
// does not answer, for StartTimeout (0: until ctx ends). It returns
// ctx.Err() when ctx ends first.
func (w *Worker) ensureTopology(ctx context.Context, js jetstream.JetStream) (*Topology, error) {
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if w.cfg.StartTimeout > 0 {
		wctx, cancel = context.WithTimeoutCause(ctx, w.cfg.StartTimeout,
			fmt.Errorf("JetStream did not answer within %s", w.cfg.StartTimeout))
	}
	defer cancel()
	logf := func(f string, a ...any) { w.log.Warn(fmt.Sprintf(f, a...)) }
	retry := newRetryLog(w.log, "JetStream not answering; retrying the topology setup")
	var last error
	topo, err := backoff.RetryNotifyWithData(func() (*Topology, error) {
		t, err := EnsureTopology(wctx, js, w.cfg.Topology, logf)
		if err == nil {
			return t, nil
		}
		if perm := permissionDenied(js.Conn()); perm != nil {
			err = fmt.Errorf("%w: %w%s", err, perm, permissionHint)
		}
		if !topologyRetryable(wctx, err) {
			if last == nil || wctx.Err() == nil {
				last = err
			}
			return nil, backoff.Permanent(err)
		}
		last = err
		return nil, err
	}, startBackOff(wctx), retry.failed)
	switch {
	case err == nil:
		if retry.attempts > 0 {
			w.log.Info("JetStream answering: topology ensured", "failed_attempts", retry.attempts)
		}
		return topo, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case wctx.Err() != nil:
		return nil, fmt.Errorf("%w (last attempt: %w)", context.Cause(wctx), last)
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrJetStreamNotEnabled):
		return nil, fmt.Errorf("%w (is JetStream enabled on the NATS server? nats-server -js, or jetstream {} in its config)", err)
	}
	return nil, err
}

// permissionDenied is nc's last error when it is a permissions violation.
// The server does not answer a request it refuses the user: the requester
// sees a timeout, and the refusal comes only as an asynchronous error. A
// worker used to take it for a server not answering yet and retry for
// ever; submit suggested no worker was running.
func permissionDenied(nc *nats.Conn) error {
	if nc == nil {
		return nil
	}
	if err := nc.LastError(); errors.Is(err, nats.ErrPermissionViolation) {
		return err
	}
	return nil
}

// permissionHint follows a permissions violation in an error.
const permissionHint = " (the NATS user lacks a permission: it must publish to the JetStream API, $JS.API.>, and to the subjects of the prefix's streams and buckets, and subscribe to its reply inboxes, _INBOX.>)"
