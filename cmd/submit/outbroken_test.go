package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// failingWriter is a standard output that cannot be written (a closed
// pipe: submit --file jobs.jsonl --json | head -1).
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

// TestBatchStopsWhenResultsCannotBeWritten: once the results (--out, or
// --json's standard output) cannot be written (a full disk, a closed
// pipe), the batch submits no more lines: it ran every line, each a paid
// model run whose result went nowhere, and said so only at the end.
func TestBatchStopsWhenResultsCannotBeWritten(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	_, runner := startWorker(t)
	const lines = 12
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{name: "out is a full disk", args: []string{"--out", "/dev/full"},
			want: "--out /dev/full: write /dev/full: no space left on device"},
		{name: "json to a closed stdout", args: []string{"--json"},
			want: "standard output: broken pipe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prefix := strings.ReplaceAll(tc.name, " ", "-")
			var batch strings.Builder
			for i := 1; i <= lines; i++ {
				fmt.Fprintf(&batch, `{"id":"%s-%d","task":"echo:%d"}`+"\n", prefix, i, i)
			}
			file := filepath.Join(t.TempDir(), "jobs.jsonl")
			if err := os.WriteFile(file, []byte(batch.String()), 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var stderr bytes.Buffer
			args := append([]string{"--file", file, "--parallel", "1"}, tc.args...)
			code := run(ctx, args, strings.NewReader(""), failingWriter{}, &stderr)
			if code != exitFailed || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("want exit 1 and %q\ngot %d:\n%s", tc.want, code, stderr.String())
			}
			// With one job at a time, the line after the first may have
			// started before the write failed; none after it.
			for i := 3; i <= lines; i++ {
				if n := runner.count(fmt.Sprintf("%s-%d", prefix, i)); n != 0 {
					t.Errorf("line %d ran %d times after the results could not be written", i, n)
				}
			}
			if n := strings.Count(stderr.String(), "not submitted: the results could not be written"); n < lines-2 {
				t.Errorf("%d lines say why they were not submitted, want at least %d:\n%s", n, lines-2, stderr.String())
			}
		})
	}
}
