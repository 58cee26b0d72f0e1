//go:build linux

package codemode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
)

// signalHost sends sig to the execution's child process (the one whose
// arguments hold marker) during the first tool call, then answers it.
type signalHost struct {
	t      *testing.T
	sig    syscall.Signal
	marker string
}

func (h *signalHost) Call(ctx context.Context, seq int, name string, args json.RawMessage) (Result, error) {
	h.t.Helper()
	pid := processWithArg(h.t, h.marker)
	if err := syscall.Kill(pid, h.sig); err != nil {
		h.t.Errorf("kill %d: %v", pid, err)
	}
	return Result{Text: `"answered"`}, nil
}
func (h *signalHost) Now(int) int64      { return 0 }
func (h *signalHost) Random(int) float64 { return 0 }

// processWithArg is the child of this process with arg among its
// arguments.
func processWithArg(t *testing.T, arg string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && bytes.Contains(cmdline, []byte("\x00"+arg+"\x00")) {
			return pid
		}
	}
	t.Fatalf("no process with the argument %q", arg)
	return 0
}

// The worker's shutdown signals reach its code-mode children too: Ctrl-C
// in a terminal signals the whole process group, systemd's stop every
// process of the unit's cgroup. The worker then lets its running jobs
// finish (JETAGENT_SHUTDOWN_GRACE), but the child died of the signal at
// once, and the script, its tool calls made, came back to the model as
// "the code's process ended without a result (signal: interrupt)": a
// model may well run it again. The child now leaves those signals to
// the worker, which ends it by closing its stdin or killing it.
func TestProcessChildOutlivesShutdownSignals(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			marker := "codeattack-signal-" + strconv.Itoa(int(sig))
			cat := NewCatalog([]Tool{{Name: "work"}})
			// The loop after the call is time for a signal not ignored
			// to end the child before it answers.
			code := `const r = await tools.work({}); let n = 0; for (let i = 0; i < 1e6; i++) n += i % 2; r + " " + n`
			out := Process{Args: []string{marker}}.Run(context.Background(), cat, code, &signalHost{t: t, sig: sig, marker: marker}, Limits{})
			if out.Err != nil || out.Text != "answered 500000" {
				t.Fatalf("Text %q, Err %v; want the script's value", out.Text, out.Err)
			}
		})
	}
}

// A small memory limit (the worker takes 16 MiB and up) leaves a script
// its MaxMemory: the child's address-space limit was 8 x MaxMemory +
// 1 GiB in all, but a Go process maps about 1.3 GiB of runtime
// reservations before running anything (more in a cgo build, glibc's
// per-thread arenas), so with 16 to 64 MiB every script, 1 + 1 or a
// string of 1 MiB, died of "the code's process ran out of memory".
func TestProcessSmallMemoryLimit(t *testing.T) {
	if raceEnabled {
		t.Skip("under the race detector the child has no address-space limit; `go test -run TestProcessSmallMemoryLimit ./internal/codemode` runs it")
	}
	t.Parallel()
	code := `const a = []; for (let i = 0; i < 20000; i++) a.push("x" + i); "x".repeat(1 << 20).length + a.length`
	for _, mb := range []int64{16, 32, 64} {
		t.Run(strconv.FormatInt(mb, 10)+"MiB", func(t *testing.T) {
			t.Parallel()
			cat, h := echoTools()
			out := Process{}.Run(context.Background(), cat, code, h, Limits{MaxMemory: mb << 20})
			if out.Err != nil || out.Text != "1068576" {
				t.Fatalf("Text %q, Err %v; want the script's value", out.Text, out.Err)
			}
		})
	}
}
