package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/natstest"
)

// recordLog keeps every log record's message and attributes, and lets a
// test wait for one.
type recordLog struct {
	mu    sync.Mutex
	lines []string
	added chan struct{} // closed and replaced on every record
}

func newRecordLog() (*recordLog, *slog.Logger) {
	r := &recordLog{added: make(chan struct{})}
	return r, slog.New(r)
}

func (r *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (r *recordLog) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *recordLog) WithGroup(string) slog.Handler            { return r }

func (r *recordLog) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Message
	rec.Attrs(func(a slog.Attr) bool {
		line += fmt.Sprintf(" %s=%v", a.Key, a.Value)
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
	close(r.added)
	r.added = make(chan struct{})
	return nil
}

// wait returns the first line containing substr, waiting for it until
// ctx ends.
func (r *recordLog) wait(ctx context.Context, substr string) (string, error) {
	for {
		r.mu.Lock()
		lines, added := r.lines, r.added
		r.mu.Unlock()
		for _, l := range lines {
			if strings.Contains(l, substr) {
				return l, nil
			}
		}
		select {
		case <-added:
		case <-ctx.Done():
			return "", fmt.Errorf("no log line with %q: %w; log:\n%s", substr, ctx.Err(), strings.Join(lines, "\n"))
		}
	}
}

func (r *recordLog) count(substr string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, l := range r.lines {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

// text is every line logged so far.
func (r *recordLog) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

// startServerOn runs a JetStream server on port with its store in dir.
func startServerOn(t *testing.T, port int, dir string) *server.Server {
	t.Helper()
	o := natstest.Options(dir)
	o.Port = port
	return natstest.StartWith(t, o)
}

// TestConnectWaitWaitsForTheServer: with nothing listening, ConnectWait
// logs that it retries and goes on; once a server starts on the port it
// connects, and the connection carries JetStream.
func TestConnectWaitWaitsForTheServer(t *testing.T) {
	t.Parallel()
	ctx := natstest.Context(t)
	port := natstest.FreePort(t)
	rec, log := newRecordLog()
	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := NATSConfig{URL: fmt.Sprintf("nats://127.0.0.1:%d", port)}.ConnectWait(ctx, "jetagent-test", log)
		done <- result{nc, err}
	}()
	line, err := rec.wait(ctx, "not reachable; retrying")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("NATS at nats://127.0.0.1:%d not reachable; retrying err=%v", port, nats.ErrNoServers); !strings.HasPrefix(line, want) {
		t.Errorf("retry line %q, want it to start %q", line, want)
	}
	select {
	case r := <-done:
		t.Fatalf("ConnectWait returned with no server: %v", r.err)
	default:
	}
	started := time.Now()
	startServerOn(t, port, t.TempDir())
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("ConnectWait did not connect once the server was up")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.nc.Close()
	// The backoff is capped: connected within a step of the cap.
	if took := time.Since(started); took > startRetryMax+5*time.Second {
		t.Errorf("connected %s after the server started", took)
	}
	if _, err := rec.wait(ctx, "NATS reachable"); err != nil {
		t.Error(err)
	}
	js, err := jetstream.New(r.nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureTopology(ctx, js, TopologyConfig{}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestConnectWaitStopsWithItsContext: a context that ends while
// ConnectWait waits ends it at once, with the cause and the last error.
func TestConnectWaitStopsWithItsContext(t *testing.T) {
	t.Parallel()
	rec, log := newRecordLog()
	ctx, cancel := context.WithCancel(natstest.Context(t))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := NATSConfig{URL: fmt.Sprintf("nats://127.0.0.1:%d", natstest.FreePort(t))}.ConnectWait(ctx, "jetagent-test", log)
		done <- err
	}()
	if _, err := rec.wait(natstest.Context(t), "not reachable; retrying"); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !errors.Is(err, nats.ErrNoServers) {
			t.Errorf("err = %v, want context.Canceled and the last attempt's %v", err, nats.ErrNoServers)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ConnectWait went on after its context ended")
	}
}

// TestConnectWaitFailsFast: what a retry would not fix ends ConnectWait at
// the first attempt, with no retry logged: credentials the server
// refuses, TLS failures, files that do not parse, an invalid URL.
func TestConnectWaitFailsFast(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	op := newTestOperator(t)
	garbage := t.TempDir() + "/garbage.pem"
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	password := startConfiguredServer(t, func(o *server.Options) { o.Username, o.Password = "agent", "s3cret" })
	jwtServer := startConfiguredServer(t, op.configure)
	mtls := startConfiguredServer(t, func(o *server.Options) {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
			CertFile: pki.serverCert, KeyFile: pki.serverKey, CaFile: pki.ca, Verify: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		o.TLSConfig, o.TLS, o.TLSVerify, o.TLSTimeout = tc, true, true, 10
	})
	plain := startConfiguredServer(t, func(*server.Options) {})
	tests := []struct {
		name string
		cfg  NATSConfig
		want string // lower case; "|" separates alternatives
	}{
		{"wrong password", NATSConfig{URL: password.ClientURL(), User: "agent", Password: "guess"}, "authorization violation"},
		{"no credentials", NATSConfig{URL: password.ClientURL()}, "refused the credentials"},
		{"untrusted account", NATSConfig{URL: jwtServer.ClientURL(), Creds: op.foreignCreds}, "authorization violation"},
		{"server not trusted", NATSConfig{URL: mtls.ClientURL(), CA: pki.strangerCA, Cert: pki.clientCert, Key: pki.clientKey},
			"certificate signed by unknown authority"},
		{"no client certificate", NATSConfig{URL: mtls.ClientURL(), CA: pki.ca},
			"certificate required|connection closed by remote after tls handshake"},
		{"TLS wanted, server without", NATSConfig{URL: plain.ClientURL(), CA: pki.ca}, "secure connection not available"},
		{"CA file not a certificate", NATSConfig{URL: plain.ClientURL(), CA: garbage}, "nats_ca=" + strings.ToLower(garbage)},
		{"creds file not credentials", NATSConfig{URL: plain.ClientURL(), Creds: garbage}, "nats_creds=" + strings.ToLower(garbage)},
		{"port out of range", NATSConfig{URL: "nats://127.0.0.1:99999"}, "port 99999 is not between 1 and 65535"},
		{"not a URL", NATSConfig{URL: "nats://127.0.0.1:4222:1"}, "too many colons|invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec, log := newRecordLog()
			ctx := natstest.Context(t)
			nc, err := tt.cfg.ConnectWait(ctx, "jetagent-test", log)
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("retried until the context ended: %v", err)
			}
			if !containsAny(strings.ToLower(err.Error()), tt.want) {
				t.Errorf("err %q, want %q", err, tt.want)
			}
			if n := rec.count("retrying"); n > 0 {
				t.Errorf("%d retries logged for %v:\n%s", n, err, strings.Join(rec.lines, "\n"))
			}
			t.Logf("refused: %v", err)
		})
	}
}

// TestConnectRetryable: the failures of a server starting, restarting or
// not resolvable yet are retried.
func TestConnectRetryable(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		nats.ErrNoServers, io.EOF, nats.ErrTimeout,
		&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "nats", IsNotFound: true}},
		&net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")},
		fmt.Errorf("%w: %w", nats.ErrTLS, &net.OpError{Op: "read", Err: timeoutErr{}}),
	} {
		if !connectRetryable(err) {
			t.Errorf("%v is not retried", err)
		}
	}
	for _, err := range []error{
		nats.ErrAuthorization, nats.ErrAuthExpired, nats.ErrSecureConnRequired,
		fmt.Errorf("%w: %w", nats.ErrTLS, io.EOF),
		// How crypto/tls reports the server's alert when it refuses the
		// client's certificate (or its absence) after the handshake.
		&net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")},
	} {
		if connectRetryable(err) {
			t.Errorf("%v is retried", err)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestRedactURLs(t *testing.T) {
	t.Parallel()
	got := redactURLs("nats://u:pw@a:4222, nats://t0ken@b:4222,nats://c:4222")
	if want := "nats://u:xxxxx@a:4222,nats://xxxxx@b:4222,nats://c:4222"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestRunWaitsForJetStream: a worker whose server went away before its
// first topology setup waits past the requests' own retries (about 10 s)
// and starts once the server is back on its port and store.
func TestRunWaitsForJetStream(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the topology requests' own retries (about 10 s)")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
	defer cancel()
	port, dir := natstest.FreePort(t), t.TempDir()
	o := natstest.Options(dir)
	o.Port = port
	first, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	first.Start()
	if !first.ReadyForConnections(waitTimeout) {
		t.Fatal("server not ready")
	}
	nc, err := nats.Connect(first.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	first.Shutdown()
	first.WaitForShutdown()

	rec, log := newRecordLog()
	w, err := NewWorker(Config{Conn: nc, Runner: RunnerFunc(echoRunner), Logger: log, Topology: testTopology()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	if _, err := rec.wait(ctx, "JetStream not answering; retrying the topology setup"); err != nil {
		t.Fatal(err)
	}
	startServerOn(t, port, dir)
	select {
	case <-w.Ready():
	case err := <-done:
		t.Fatalf("Run returned: %v", err)
	case <-ctx.Done():
		t.Fatal("the worker did not start once the server was back")
	}
	c := newClient(t, nc)
	if _, err := c.Submit(ctx, &Job{ID: "after-wait", Task: "hello"}); err != nil {
		t.Fatal(err)
	}
	if st := waitStatus(t, c, "after-wait"); st.Status != StatusSucceeded {
		t.Errorf("job: %+v", st)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestRunStartTimeoutAndStop: with NATS away, a StartTimeout ends Run with
// an error saying so; a context that ends first makes Run return nil (a
// shutdown before the start); a server without JetStream fails at once
// with a hint.
func TestRunStartTimeoutAndStop(t *testing.T) {
	t.Parallel()
	away := func(t *testing.T) *nats.Conn {
		s := natstest.Start(t)
		nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		s.Shutdown()
		s.WaitForShutdown()
		return nc
	}
	t.Run("start timeout", func(t *testing.T) {
		t.Parallel()
		w, err := NewWorker(Config{Conn: away(t), Runner: RunnerFunc(echoRunner), StartTimeout: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		err = w.Run(natstest.Context(t))
		if err == nil || !strings.Contains(err.Error(), "JetStream did not answer within 3s") || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Run: %v", err)
		}
	})
	t.Run("stopped while waiting", func(t *testing.T) {
		t.Parallel()
		w, err := NewWorker(Config{Conn: away(t), Runner: RunnerFunc(echoRunner)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(natstest.Context(t))
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		// The first topology request waits for the server; the stop
		// comes meanwhile (or before Run sends it: either way Run has not
		// started and returns nil).
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run stopped while waiting: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Run went on after its context ended")
		}
	})
	t.Run("no JetStream", func(t *testing.T) {
		t.Parallel()
		o := natstest.Options(t.TempDir())
		o.JetStream = false
		nc := natstest.Connect(t, natstest.StartWith(t, o))
		w, err := NewWorker(Config{Conn: nc, Runner: RunnerFunc(echoRunner)})
		if err != nil {
			t.Fatal(err)
		}
		ctx := natstest.Context(t)
		err = w.Run(ctx)
		if err == nil || !strings.Contains(err.Error(), "is JetStream enabled on the NATS server?") || ctx.Err() != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// echoRunner answers every job with its task.
func echoRunner(_ context.Context, job *Job, _ RunEnv) (*Outcome, error) {
	return &Outcome{Result: agentloop.Result{Answer: job.Task, Rounds: 1, StopReason: "final_answer",
		Messages: []llm.Message{{Role: llm.RoleAssistant, Content: job.Task}}}}, nil
}

// TestStartBackOffIsCapped: the delays between start attempts grow from
// startRetryInitial and never exceed startRetryMax, jitter included.
func TestStartBackOffIsCapped(t *testing.T) {
	t.Parallel()
	b := startBackOff(context.Background())
	b.Reset()
	for i := range 100 {
		d := b.NextBackOff()
		if d <= 0 || d > startRetryMax {
			t.Fatalf("delay %d is %s, want within (0, %s]", i, d, startRetryMax)
		}
		if i == 0 && d > startRetryInitial*5/4 {
			t.Errorf("first delay %s, want about %s", d, startRetryInitial)
		}
	}
}
