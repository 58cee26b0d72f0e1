//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/childtest"
	"github.com/jetagent/jetagent/internal/codemode"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/natstest"
)

// A worker stopped as systemd stops a service (SIGTERM to every process
// of the unit: the worker and its code-mode child) or by Ctrl-C in a
// terminal (SIGINT to the process group) lets its running jobs finish
// within JETAGENT_SHUTDOWN_GRACE. A script running then finishes too:
// its child died of the signal at once, and the model read "the code's
// process ended without a result (signal: terminated)" for a script
// whose tool calls had run.
func TestWorkerStopLetsTheScriptFinish(t *testing.T) {
	t.Parallel()
	needMCPServer(t)
	ctx := natstest.Context(t)
	ns, nc := startCrashNATS(t)
	model := scriptModel(t, `const r = await tools.slow({ms: 2000}); "finished: " + r`, "Script: ")
	env := append(crashWorkerEnv(t, ns.ClientURL(), model.URL()), "JETAGENT_TOOL_MODE=code", "JETAGENT_SHUTDOWN_GRACE=1m")
	w, client := startFirstWorker(ctx, t, nc, "stop", env)
	if _, err := client.Submit(ctx, &jobs.Job{ID: "stop", Task: "Run the script."}); err != nil {
		t.Fatal(err)
	}
	// The script's call of slow is under way once its tool.call is out.
	calling := make(chan struct{})
	watched := make(chan error, 1)
	go func() {
		var once bool
		_, err := client.Watch(ctx, "stop", func(ev jobs.Event) {
			if ev.Type == agentloop.EventToolCall && bytes.Contains(ev.Data, []byte(`"from":"execute_code"`)) && !once {
				once = true
				close(calling)
			}
		})
		watched <- err
	}()
	select {
	case <-calling:
	case <-ctx.Done():
		t.Fatal("the script's tool call never started")
	}
	child := codeChild(t, w.cmd.Process.Pid)
	for _, pid := range []int{w.cmd.Process.Pid, child} {
		if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	st, err := client.Wait(ctx, "stop")
	if err != nil {
		t.Fatal(err)
	}
	if err := <-watched; err != nil {
		t.Fatal(err)
	}
	if st.Status != jobs.StatusSucceeded || st.Attempt != 1 || st.Result == nil || !strings.Contains(st.Result.Answer, "finished: slept 2000 ms") {
		t.Fatalf("state %+v, result %+v: want the script's value on the first attempt", st, st.Result)
	}
	if err := w.cmd.Wait(); err != nil {
		t.Errorf("worker after SIGTERM: %v", err)
	}
	w.exited = true
}

// codeChild is the code-mode child process of the worker pid.
func codeChild(t *testing.T, pid int) int {
	t.Helper()
	for _, p := range childtest.Children(t, pid) {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p))
		if err == nil && bytes.Contains(env, []byte(codemode.ChildEnv+"=1\x00")) {
			return p
		}
	}
	t.Fatalf("worker %d has no code-mode child", pid)
	return 0
}
