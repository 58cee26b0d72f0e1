package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY is a pseudo-terminal: what submit writes to slave, a terminal
// shows; master reads it.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open the pty's slave: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// TestTerminalShowsNoBidiControls: what reaches the user's terminal from
// a job (its answer, its error, its state) came through with terminal
// sequences and bidirectional controls as the model or the worker wrote
// them; they are shown as U+FFFD now. An answer piped to a file stays as
// the model wrote it.
func TestTerminalShowsNoBidiControls(t *testing.T) {
	startWorker(t)
	master, slave := openPTY(t)
	screen := make(chan string, 1)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, master) // until the slave is closed (EIO)
		screen <- b.String()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var stderr bytes.Buffer
	if code := run(ctx, []string{"--id", "bidi-answer", "echo:" + trojan}, strings.NewReader(""), slave, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	stderr.Reset()
	if code := run(ctx, []string{"--id", "bidi-fail", "fail:" + trojan}, strings.NewReader(""), io.Discard, &stderr); code != exitFailed {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	failOut := stderr.String()
	if code := run(ctx, []string{"status", "bidi-fail"}, strings.NewReader(""), slave, io.Discard); code != 0 {
		t.Fatalf("status: exit %d", code)
	}
	slave.Close()
	var shownOnScreen string
	select {
	case shownOnScreen = <-screen:
	case <-ctx.Done():
		t.Fatal("the terminal's output did not end")
	}
	for _, tc := range []struct{ name, got, want string }{
		{"the answer and the state on a terminal", shownOnScreen, "safe\uFFFD]0;pwned"},
		{"following a failed job", failOut, "job bidi-fail failed: safe\uFFFD]0;pwned"},
	} {
		// The terminal's line discipline writes each newline as \r\n.
		if bad := obeyedIn(strings.ReplaceAll(tc.got, "\r\n", "\n")); len(bad) > 0 || !strings.Contains(tc.got, tc.want) {
			t.Errorf("%s: got %q (obeyed: %q), want it to hold %q", tc.name, tc.got, bad, tc.want)
		}
	}

	// Piped, the answer is the model's.
	res := submitCmd(t, "", "status", "--json", "bidi-answer")
	if !strings.Contains(res.stdout, `"answer":"safe\u001b]0;pwned\u0007\rrm -rf ~ `+"\u202e") {
		t.Errorf("status --json: %+v", res)
	}
	res = submitCmd(t, "", "--id", "bidi-answer", "echo:"+trojan)
	if res.code != 0 || res.stdout != trojan+"\n" {
		t.Errorf("piped answer: %+v", res)
	}
}
