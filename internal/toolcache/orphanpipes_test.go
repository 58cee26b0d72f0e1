package toolcache

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A stdio server that exits (here: is killed) mid-call while a process it
// started still holds its stdout and stderr: neither pipe reaches EOF, so
// the exit used to go unnoticed and the call in flight waited for its
// deadline (and the calls after it, sent to a process that was gone, until
// HealthMisses health checks went unanswered). The call fails at once with
// ErrSessionLost, saying how the server ended, and the next call gets a
// fresh server. The helper is started in the server's process group (a
// wrapper script's `helper &`) or in a session of its own (setsid: outside
// the group the pool kills).
func TestServerExitWhileAChildHoldsItsPipes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, helper, mode string
	}{
		{"group", "sleep 300", SessionShared},
		{"group per-job", "sleep 300", SessionPerJob},
		{"setsid", "setsid sleep 300", SessionShared},
		{"setsid per-job", "setsid sleep 300", SessionPerJob},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			helperPID := filepath.Join(t.TempDir(), "helper.pid")
			cfg := stdioTestServer("orphan")
			// The helper inherits the server's stdout and stderr.
			cfg.Args = []string{"-c", tc.helper + ` & echo $! > "$1"; exec "$0" -test.run=^$`, cfg.Command, helperPID}
			cfg.Command = "/bin/sh"
			cfg.SessionMode = tc.mode
			n := newNotes()
			p := newTestPool(t, Config{Servers: map[string]ServerConfig{"orphan": cfg}}, n.option())
			v := newTestView(t, p, nil, nil, nil)
			pid1 := callPID(t, v, "pid")
			helper := readPID(t, helperPID)
			t.Cleanup(func() { _ = syscall.Kill(helper, syscall.SIGKILL) }) // one outside the group outlives the pool

			errc := make(chan error, 1)
			go func() {
				_, err := v.CallTool(context.Background(), "slow", json.RawMessage(`{"id":"o1"}`))
				errc <- err
			}()
			n.wait(t, "test/started", "o1")
			if err := syscall.Kill(pid1, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-errc:
				if !errors.Is(err, ErrSessionLost) || !strings.Contains(err.Error(), "(the server process ended: signal: killed)") {
					t.Fatalf("in-flight call error = %v, want ErrSessionLost saying the server was killed", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the call in flight did not return within 20 s of its server's death")
			}
			if pid2 := callPID(t, v, "pid"); pid2 == pid1 {
				t.Fatalf("same pid %d after the server died", pid1)
			}
			if tc.helper == "sleep 300" {
				waitGone(t, helper)
			}
		})
	}
}

// readPID reads the pid a server's wrapper script wrote to path.
func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pid
}

// waitGone waits until pid, a process of the server's group, has ended:
// it was killed with the group (its pidfd turns readable once it has
// exited; whoever reaps it, it is no process of this test).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 20_000)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			t.Fatal(err)
		case n == 0:
			t.Fatalf("helper %d of the dead server's group still runs after 20 s", pid)
		}
		return
	}
}
