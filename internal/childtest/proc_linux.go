package childtest

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ParentPID reads a process's parent from /proc (0 if it is gone).
func ParentPID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// Processes lists the running processes keep takes, from /proc.
func Processes(t *testing.T, keep func(pid int) bool) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err == nil && keep(p) {
			pids = append(pids, p)
		}
	}
	return pids
}

// Children lists the processes whose parent is pid.
func Children(t *testing.T, pid int) []int {
	t.Helper()
	return Processes(t, func(p int) bool { return ParentPID(p) == pid })
}

// Exited waits up to d for the process behind pidfd fd to exit.
func Exited(fd int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(max(0, time.Until(deadline).Milliseconds())))
		if errors.Is(err, unix.EINTR) {
			continue // the Go runtime's signals interrupt poll
		}
		return err == nil && n > 0
	}
}
