package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// TestEmbeddedAuthConfig: in embedded mode the NATS_* authentication
// variables configure the embedded server, an address beyond loopback
// without them is refused, and NATS_CREDS (operator mode) is refused
// rather than ignored.
func TestEmbeddedAuthConfig(t *testing.T) {
	// Not parallel: it sets environment variables.
	tests := []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"JETAGENT_LISTEN": "0.0.0.0:4222"},
			[]string{"JETAGENT_LISTEN=0.0.0.0:4222", "NATS_USER", "NATS_PASSWORD", "NATS_TOKEN", "NATS_CA"}},
		{map[string]string{"JETAGENT_LISTEN": ":4222"}, []string{"JETAGENT_LISTEN=:4222", "not a loopback"}},
		{map[string]string{"NATS_CREDS": "/etc/user.creds"}, []string{"NATS_CREDS", "NATS_URL", "operator"}},
		{map[string]string{"NATS_CA": "/etc/ca.pem"}, []string{"NATS_CA", "NATS_CERT", "NATS_KEY"}},
		// A user without a password authenticates nobody: any client
		// giving the name got in, also on a network address.
		{map[string]string{"NATS_USER": "agent"}, []string{"invalid NATS_USER", "NATS_PASSWORD"}},
		{map[string]string{"JETAGENT_LISTEN": "0.0.0.0:4222", "NATS_USER": "agent"}, []string{"invalid NATS_USER", "NATS_PASSWORD"}},
		// TLS alone encrypts but lets anyone in.
		{map[string]string{"JETAGENT_LISTEN": "0.0.0.0:4222", "NATS_CERT": "hardening_test.go", "NATS_KEY": "hardening_test.go"},
			[]string{"JETAGENT_LISTEN=0.0.0.0:4222"}},
		{map[string]string{"NATS_CERT": "/missing/c.pem", "NATS_KEY": "hardening_test.go"},
			[]string{"invalid NATS_CERT", "/missing/c.pem"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.want, ","), func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", "sk-test")
			t.Setenv("JETAGENT_DATA_DIR", t.TempDir())
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			// loadSettings, not run: a worker that wrongly accepted the
			// settings would serve until killed, on a real port.
			_, err := loadSettings()
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q, want it to name %q", err, w)
				}
			}
		})
	}

	t.Run("user and password reach the embedded server", func(t *testing.T) {
		url := serveEmbedded(t, map[string]string{"NATS_USER": "agent", "NATS_PASSWORD": "s3cret"})
		if nc, err := (jobs.NATSConfig{URL: url}).Connect("anonymous"); err == nil {
			nc.Close()
			t.Fatal("an anonymous client connected to the embedded server")
		} else if !strings.Contains(err.Error(), "Authorization Violation") {
			t.Fatalf("anonymous: %v", err)
		}
		// submit reads the same variables.
		nc, err := (jobs.NATSConfig{URL: url, User: "agent", Password: "s3cret"}).Connect("submit")
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		ctx := natstest.Context(t)
		c, err := jobs.NewClient(ctx, nc, jobs.ClientConfig{})
		if err != nil {
			t.Fatal(err)
		}
		rc, err := c.Submit(ctx, &jobs.Job{Task: "wave"})
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Wait(ctx, rc.ID)
		if err != nil || st.Status != jobs.StatusSucceeded {
			t.Fatalf("job over the authenticated connection: %+v, %v", st, err)
		}
	})
}

// serveEmbedded runs the worker's serve on an embedded NATS at a random
// local port, configured by env plus a scripted model, until the test
// ends; it returns the embedded server's client URL.
func serveEmbedded(t *testing.T, env map[string]string) string {
	t.Helper()
	model := llmtest.NewServer(t)
	model.Handle(scriptedModel)
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", model.URL())
	t.Setenv("JETAGENT_DATA_DIR", filepath.Join(t.TempDir(), "nats"))
	t.Setenv("JETAGENT_LISTEN", "127.0.0.1:0")
	for k, v := range env {
		t.Setenv(k, v)
	}
	s, err := loadSettings()
	if err != nil {
		t.Fatal(err)
	}
	_, nc := startServe(t, s)
	return nc.ConnectedUrl()
}

// TestMaxJobBytesAgainstMaxPayload: a JETAGENT_MAX_JOB_BYTES the server
// cannot carry stops the worker at start, naming the variable and the
// server's limit; the default is lowered to fit, logged at info (not a
// warning at every start on a stock server for a setting nobody made), so
// a stock nats-server (max_payload 1 MiB) works without settings.
func TestMaxJobBytesAgainstMaxPayload(t *testing.T) {
	ns, err := jobs.StartEmbedded(jobs.EmbeddedConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0", MaxPayload: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	model := llmtest.NewServer(t)
	model.Handle(scriptedModel)
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", model.URL())
	t.Setenv("NATS_URL", ns.ClientURL())

	t.Run("explicit", func(t *testing.T) {
		t.Setenv("JETAGENT_MAX_JOB_BYTES", "1048576")
		s, err := loadSettings()
		if err != nil {
			t.Fatal(err)
		}
		err = serve(natstest.Context(t), s, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err == nil {
			t.Fatal("started")
		}
		for _, want := range []string{"JETAGENT_MAX_JOB_BYTES=1048576", "65536", "max_payload"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q lacks %q", err, want)
			}
		}
	})
	t.Run("default", func(t *testing.T) {
		s, err := loadSettings()
		if err != nil {
			t.Fatal(err)
		}
		var logs lockedBuffer
		ctx, cancel := context.WithCancel(natstest.Context(t))
		ready := make(chan *jobs.Worker, 1)
		done := make(chan error, 1)
		go func() {
			done <- serve(ctx, s, slog.New(slog.NewTextHandler(&logs, nil)), func(w *jobs.Worker, _ *nats.Conn) { ready <- w })
		}()
		select {
		case <-ready:
		case err := <-done:
			t.Fatalf("worker stopped: %v", err)
		case <-ctx.Done():
			t.Fatal("worker not ready")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf("max_job_bytes=%d", 64<<10-jobs.JobHeaderRoom)
		if !strings.Contains(logs.String(), `level=INFO msg="JETAGENT_MAX_JOB_BYTES (unset) lowered`) || !strings.Contains(logs.String(), want) {
			t.Errorf("no info line with %s in:\n%s", want, logs.String())
		}
	})
}

// lockedBuffer is a bytes.Buffer a logger may write while a test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
