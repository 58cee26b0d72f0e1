package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// watchBuffer is a stderr that signals when a text appears in it.
type watchBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func newWatchBuffer(want string) *watchBuffer {
	return &watchBuffer{want: want, seen: make(chan struct{})}
}

func (b *watchBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	had := strings.Contains(b.buf.String(), b.want)
	n, err := b.buf.Write(p)
	if !had && strings.Contains(b.buf.String(), b.want) {
		close(b.seen)
	}
	return n, err
}

func (b *watchBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runAsync runs the command until ctx ends, its stderr into stderr (a
// watchBuffer or notifyBuffer); the result arrives on the channel.
func runAsync(ctx context.Context, stderr interface {
	io.Writer
	String() string
}, args ...string) <-chan result {
	done := make(chan result, 1)
	go func() {
		var out bytes.Buffer
		code := run(ctx, args, strings.NewReader(""), &out, stderr)
		done <- result{code, out.String(), stderr.String()}
	}()
	return done
}

// TestWatchUnknownID: watch on an id no job has says so at once instead of
// waiting for ever; --wait waits for a job about to come, and Ctrl-C while
// it waits says no job came (not that it goes on).
func TestWatchUnknownID(t *testing.T) {
	startWorker(t)

	t.Run("mistyped id", func(t *testing.T) {
		res := submitCmd(t, "", "watch", "no-such-job")
		if res.code != 1 || !strings.Contains(res.stderr, "no such job: no-such-job has no state") ||
			!strings.Contains(res.stderr, "submit watch --wait no-such-job") {
			t.Errorf("%+v", res)
		}
	})

	t.Run("--wait follows a job submitted later", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stderr := newWatchBuffer("waiting for it (--wait)")
		done := runAsync(ctx, stderr, "watch", "--wait", "later-1")
		select {
		case <-stderr.seen:
		case res := <-done:
			t.Fatalf("watch ended first: %+v", res)
		}
		if res := submitCmd(t, "", "--detach", "--id", "later-1", "echo:hello"); res.code != 0 {
			t.Fatalf("submit %+v", res)
		}
		res := <-done
		if res.code != 0 || strings.TrimSpace(res.stdout) != "hello" {
			t.Errorf("%+v", res)
		}
	})

	t.Run("Ctrl-C while waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stderr := newWatchBuffer("waiting for it (--wait)")
		done := runAsync(ctx, stderr, "watch", "--wait", "never-1")
		select {
		case <-stderr.seen:
		case res := <-done:
			t.Fatalf("watch ended first: %+v", res)
		}
		cancel()
		select {
		case res := <-done:
			if res.code != 1 || !strings.Contains(res.stderr, "stopped waiting; no job never-1 was submitted meanwhile") ||
				strings.Contains(res.stderr, "goes on") {
				t.Errorf("%+v", res)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("watch did not stop")
		}
	})
}

// TestBatchDuplicateIDs: two lines with one id, or a line whose id already
// ran, are flagged as not run (exit 1), never reported with the other
// job's answer.
func TestBatchDuplicateIDs(t *testing.T) {
	startWorker(t)
	if res := submitCmd(t, "", "--id", "done-1", "echo:earlier"); res.code != 0 {
		t.Fatalf("%+v", res)
	}
	tests := []struct {
		name   string
		detach bool
	}{{"waiting", false}, {"detached", true}}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := []string{"twice-a", "twice-b"}[i]
			in := writeLines(t,
				`{"id":"`+id+`","task":"echo:first"}`,
				`{"id":"`+id+`","task":"echo:second"}`,
				`{"id":"done-1","task":"echo:again"}`)
			out := filepath.Join(t.TempDir(), "out.jsonl")
			args := []string{"--file", in, "--out", out}
			if tt.detach {
				args = append(args, "--detach")
			}
			res := submitCmd(t, "", args...)
			if res.code != 1 || !strings.Contains(res.stderr, "3 jobs: 1 ") {
				t.Fatalf("%+v", res)
			}
			got := readOut(t, out)
			if l := got[1]; l.ID != id || (!tt.detach && l.Answer != "first") {
				t.Errorf("line 1: %+v", l)
			}
			if l := got[2]; l.Status != "failed" || !strings.Contains(l.Error, "duplicate job id: id "+id+" is also on line 1") {
				t.Errorf("line 2: %+v", l)
			}
			if l := got[3]; l.Status != "failed" || l.Answer != "" ||
				!strings.Contains(l.Error, "job done-1 was submitted before (succeeded) and is not queued again") {
				t.Errorf("line 3: %+v", l)
			}
		})
	}
}
