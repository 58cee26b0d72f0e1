//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemoWhateverTheWorkersSettings: the demo passes the caller's
// JETAGENT_* variables to its worker. With JETAGENT_LOG_FORMAT=json or
// JETAGENT_LOG_LEVEL=warn (an operator's settings, exported in the shell)
// it missed the worker's "worker ready" line, waited 60 s and failed with
// "worker not ready after 60s"; with a JETAGENT_QUEUES that leaves out
// the default queue its job waited for a worker for ever.
func TestDemoWhateverTheWorkersSettings(t *testing.T) {
	t.Parallel()
	bin := demoBinaries(t)
	for _, setting := range []string{
		"JETAGENT_LOG_FORMAT=json",
		"JETAGENT_LOG_LEVEL=warn",
		"JETAGENT_LOG_LEVEL=ERROR",
		"JETAGENT_QUEUES=gpu,batch",
	} {
		t.Run(setting, func(t *testing.T) {
			t.Parallel()
			// Well within the 60 s the demo waits for its worker: a demo
			// that misses the ready line is stopped before it gives up.
			ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
			defer cancel()
			demo := exec.CommandContext(ctx, filepath.Join(bin, "demo"))
			// Stopped as a user would (Ctrl-C): it stops its worker and
			// submit, which would otherwise outlive it holding its output.
			demo.Cancel = func() error { return demo.Process.Signal(syscall.SIGTERM) }
			demo.WaitDelay = 20 * time.Second
			demo.Env = append(withoutVar(os.Environ(), "OPENAI_BASE_URL"), "TMPDIR="+t.TempDir(), setting)
			var stdout, stderr bytes.Buffer
			demo.Stdout, demo.Stderr = &stdout, &stderr
			err := demo.Run()
			if ctx.Err() != nil {
				t.Fatalf("the demo did not end within 45s\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			}
			if err != nil || !strings.Contains(stdout.String(), "demo: done") {
				t.Fatalf("exit %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
		})
	}
}
