package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

// TestReadingTheTerminalSaysSo: submit --file - (and --job -) with stdin a
// terminal read it in silence: a user who had meant a pipe saw submit
// hang. It says it reads the terminal and how to end, and takes what is
// typed.
func TestReadingTheTerminalSaysSo(t *testing.T) {
	startWorker(t)
	for _, tc := range []struct {
		name, typed, want, then string
		args                    []string
	}{
		{"batch", `"echo:typed"` + "\n", "reading the batch from the terminal, one job a line; end it with Ctrl-D",
			"1 jobs: 1 submitted, 0 not", []string{"--file", "-", "--detach"}},
		{"job", `{"task":"echo:typed"}` + "\n", "reading the job (JSON) from the terminal; end it with Ctrl-D",
			"", []string{"--job", "-", "--detach"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			master, slave := openPTY(t)
			go func() { _, _ = io.Copy(io.Discard, master) }() // the terminal's echo
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			stderr := &signalWriter{want: tc.want, seen: make(chan struct{})}
			done := make(chan int, 1)
			go func() { done <- run(ctx, tc.args, slave, io.Discard, stderr) }()
			select {
			case <-stderr.seen:
			case code := <-done:
				t.Fatalf("exit %d before reading\n%s", code, stderr)
			case <-time.After(30 * time.Second):
				t.Fatalf("reading the terminal without a word\n%s", stderr)
			}
			if _, err := master.WriteString(tc.typed + "\x04"); err != nil { // Ctrl-D on a line of its own
				t.Fatal(err)
			}
			select {
			case code := <-done:
				if code != 0 || !strings.Contains(stderr.String(), tc.then) {
					t.Errorf("exit %d\n%s", code, stderr)
				}
			case <-ctx.Done():
				t.Fatalf("Ctrl-D did not end the input\n%s", stderr)
			}
		})
	}
}
