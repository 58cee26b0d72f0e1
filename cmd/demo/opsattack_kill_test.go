//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jetagent/jetagent/internal/childtest"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// TestKilledDemoLeavesNoProcess: a demo SIGKILLed (an IDE's stop button,
// a CI timeout's kill) while its job ran left its worker (with its
// embedded NATS and MCP server) and its submit running for good: the
// worker waited on the model, submit followed the job. They now get
// SIGTERM when the demo dies, and end.
func TestKilledDemoLeavesNoProcess(t *testing.T) {
	t.Parallel()
	bin := demoBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A model that never answers: the job runs until the test ends.
	never := make(chan struct{})
	model := llmtest.NewServer(t)
	model.Handle(func(llmtest.RecordedRequest) llmtest.Reply { return llmtest.Reply{Block: never} })
	t.Cleanup(func() { close(never) })

	demo := exec.Command(filepath.Join(bin, "demo"))
	demo.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "OPENAI_BASE_URL="+model.URL(), "OPENAI_API_KEY=", "OPENAI_MODEL=m")
	if err := demo.Start(); err != nil {
		t.Fatal(err)
	}
	waited := false
	t.Cleanup(func() {
		if !waited {
			_ = demo.Process.Kill()
			_ = demo.Wait()
		}
		for _, p := range processesOf(t, bin) {
			var pid int
			if _, err := fmt.Sscanf(p, "/proc/%d", &pid); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL) // ours: started by this test's demo
			}
		}
	})
	if err := model.WaitRequests(ctx, 1); err != nil {
		t.Fatalf("the job did not reach the model: %v", err)
	}
	// The demo's children now: its worker and the submit following the job.
	children := map[string]int{} // name -> pidfd
	for _, pid := range childtest.Children(t, demo.Process.Pid) {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone meanwhile
		}
		defer unix.Close(fd) //nolint:errcheck // a pidfd
		children[filepath.Base(exe)] = fd
	}
	if _, ok := children["worker"]; !ok {
		t.Fatalf("no worker among the demo's children %v", children)
	}
	if _, ok := children["submit"]; !ok {
		t.Fatalf("no submit among the demo's children %v", children)
	}
	if err := demo.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = demo.Wait()
	waited = true
	for name, fd := range children {
		if !childtest.Exited(fd, 30*time.Second) {
			t.Errorf("the demo's %s still runs 30s after the demo was killed", name)
		}
	}
}
