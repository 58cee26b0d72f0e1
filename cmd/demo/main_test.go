package main

import (
	"os/exec"
	"testing"
	"time"
)

// A line longer than the scanner takes stopped the reading of the child's
// output: the child then blocked on a full pipe, and Wait, which waits for
// os/exec's copy of its output, never returned.
func TestStartPrefixedLongLine(t *testing.T) {
	cmd := exec.Command("sh", "-c", `head -c 2000000 /dev/zero | tr '\000' x; echo; echo after`)
	if _, err := startPrefixed(cmd, "[test] ", "never printed"); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the child did not exit within 30s: its output, past a 2 MB line, was not read")
	}
}
