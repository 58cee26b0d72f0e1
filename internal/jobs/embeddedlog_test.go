package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// records is a slog handler keeping every record, for tests to read.
type records struct {
	mu    sync.Mutex
	lines []slog.Record
	attrs []slog.Attr   // from WithAttrs, shared: tests use one logger
	more  chan struct{} // a record came
}

func newRecords() (*records, *slog.Logger) {
	r := &records{more: make(chan struct{}, 1)}
	return r, slog.New(r)
}

// waitFor waits until ok holds of the records (as all gives them).
func (r *records) waitFor(t *testing.T, what string, ok func([]string) bool) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for !ok(r.all()) {
		select {
		case <-r.more:
		case <-deadline:
			t.Fatalf("no %s after %s; logged:\n%s", what, waitTimeout, strings.Join(r.all(), "\n"))
		}
	}
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs(as []slog.Attr) slog.Handler {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attrs = append(r.attrs, as...)
	return r
}
func (r *records) WithGroup(string) slog.Handler { return r }

func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, rec.Clone())
	select {
	case r.more <- struct{}{}:
	default:
	}
	return nil
}

// all returns the records so far, each as "LEVEL message k=v ...".
func (r *records) all() []string { return r.atLeast(slog.LevelDebug - 4) }

// atLeast returns the records at level or above, as all does.
func (r *records) atLeast(level slog.Level) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.lines {
		if rec.Level < level {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s", rec.Level, rec.Message)
		rec.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
			return true
		})
		out = append(out, b.String())
	}
	return out
}

// TestEmbeddedStartFailureSaysWhy: a store JetStream cannot use (its
// jetstream directory a file, or not writable) failed StartEmbedded only
// after the whole ready wait (10 s), with "did not start listening": the
// server's own reason was logged to nowhere. It now fails at once with the
// reason and the directory, which the logger also gets at Error.
func TestEmbeddedStartFailureSaysWhy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		root   bool // the case holds when run as root
		spoil  func(t *testing.T, store string)
		reason string
	}{
		{"jetstream is a file", true, func(t *testing.T, store string) {
			if err := os.WriteFile(store, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "storage directory is not a directory"},
		{"jetstream not writable", false, func(t *testing.T, store string) {
			if err := os.Mkdir(store, 0o500); err != nil {
				t.Fatal(err)
			}
		}, "storage directory is not writable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !tc.root && os.Geteuid() == 0 {
				t.Skip("root writes anywhere")
			}
			dir := t.TempDir()
			store := filepath.Join(dir, "jetstream")
			tc.spoil(t, store)
			recs, log := newRecords()
			type result struct{ err error }
			done := make(chan result, 1)
			go func() {
				// The ready wait is longer than the test waits: only
				// failing at once passes.
				s, err := StartEmbedded(EmbeddedConfig{DataDir: dir, Listen: "127.0.0.1:0", Logger: log, ReadyTimeout: time.Hour})
				if s != nil {
					s.Shutdown()
					s.WaitForShutdown()
				}
				done <- result{err}
			}()
			var err error
			select {
			case r := <-done:
				err = r.err
			case <-time.After(waitTimeout):
				t.Fatalf("StartEmbedded still waiting after %s", waitTimeout)
			}
			if err == nil || !strings.Contains(err.Error(), tc.reason) || !strings.Contains(err.Error(), store) {
				t.Errorf("err = %v, want %q and %s", err, tc.reason, store)
			}
			if errs := recs.atLeast(slog.LevelError); len(errs) == 0 || !strings.Contains(strings.Join(errs, "\n"), tc.reason) {
				t.Errorf("logged at Error: %q, want %q", errs, tc.reason)
			}
		})
	}
}

// TestEmbeddedServerWarningsLogged: the embedded server ran with its logs
// off, so a warning of its own was lost: here a stream skipped at restart
// (its metadata checksum file missing), which the worker would then create
// again empty, its messages gone with no word why. Warnings reach the
// logger at Warn; a healthy start logs nothing at Info or above.
func TestEmbeddedServerWarningsLogged(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	recs, log := newRecords()
	s, err := StartEmbedded(EmbeddedConfig{DataDir: dir, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	nc, err := ConnectEmbedded(s, EmbeddedConfig{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(natstest.Context(t), jetstream.StreamConfig{Name: "KEEP", Subjects: []string{"keep"}}); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	s.Shutdown()
	s.WaitForShutdown()
	if loud := recs.atLeast(slog.LevelInfo); len(loud) > 0 {
		t.Errorf("a healthy server logged %q", loud)
	}
	if len(recs.all()) == 0 {
		t.Errorf("no notice reached the logger (at Debug)")
	}

	if err := os.Remove(filepath.Join(dir, "jetstream", "$G", "streams", "KEEP", "meta.sum")); err != nil {
		t.Fatal(err)
	}
	recs, log = newRecords()
	s, err = StartEmbedded(EmbeddedConfig{DataDir: dir, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	if warns := recs.atLeast(slog.LevelWarn); !strings.Contains(strings.Join(warns, "\n"), "Missing stream checksum file") {
		t.Errorf("logged at Warn: %q, want the missing checksum file", warns)
	}
}

// TestEmbeddedHealthyStartQuiet: a healthy start logs nothing at Info or
// above, with a password too (nats-server warns of a plaintext password,
// which NATS_PASSWORD must be: the worker's own connection presents it).
func TestEmbeddedHealthyStartQuiet(t *testing.T) {
	t.Parallel()
	for _, cfg := range []EmbeddedConfig{
		{Listen: "127.0.0.1:0"},
		{Listen: "127.0.0.1:0", User: "u", Password: "p"},
		{Listen: "127.0.0.1:0", Token: "t"},
	} {
		t.Run(cfg.AuthMode(), func(t *testing.T) {
			t.Parallel()
			recs, log := newRecords()
			cfg.DataDir, cfg.Logger = t.TempDir(), log
			s, err := StartEmbedded(cfg)
			if err != nil {
				t.Fatal(err)
			}
			s.Shutdown()
			s.WaitForShutdown()
			if loud := recs.atLeast(slog.LevelInfo); len(loud) > 0 {
				t.Errorf("logged %q", loud)
			}
		})
	}
}
