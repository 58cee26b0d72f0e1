//go:build linux

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
)

// oomScript makes goja format 2 GiB in one native step no limit stops
// (codemode's TestConversionErrorHoldsTheObjectsStrings): 256 properties
// of a null-prototype object holding one string of 8 Mi characters.
const oomScript = `const s = "x".repeat(8 << 20), o = Object.create(null);
for (let i = 0; i < 256; i++) o["k" + i] = s;
"" + o`

// A script that exhausts memory in a step no watchdog stops ends its
// code-mode child process, not the worker: the call fails with a memory
// error the model reads, the job succeeds on its first attempt, and the
// worker stops cleanly afterwards. In process the worker itself died of
// such a script (and every job it ran was taken over after the ack wait).
// Not under the race detector, whose shadow memory rules out the child's
// address-space limit; make test-go runs it without.
func TestWorkerSurvivesCodeOutOfMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("under the race detector the code child has no address-space limit; `go test -run TestWorkerSurvivesCodeOutOfMemory ./cmd/worker` runs it")
	}
	t.Parallel()
	needMCPServer(t)
	ctx := natstest.Context(t)
	ns, nc := startCrashNATS(t)
	model := scriptModel(t, oomScript, "The script failed: ")
	env := append(crashWorkerEnv(t, ns.ClientURL(), model.URL()), "JETAGENT_TOOL_MODE=code", "JETAGENT_CODE_MAX_MEMORY=67108864")
	w, client := startFirstWorker(ctx, t, nc, "oom", env)
	if _, err := client.Submit(ctx, &jobs.Job{ID: "oom", Task: "Run the script."}); err != nil {
		t.Fatal(err)
	}
	st, err := client.Wait(ctx, "oom")
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != jobs.StatusSucceeded || st.Attempt != 1 {
		t.Fatalf("state %+v, want succeeded on the first attempt", st)
	}
	// The child dies at its address-space limit; on a machine slow enough
	// that the stuck step outlasts the child's grace (2 s) after its
	// watchdog saw the heap grow, the child reports that instead. Both are
	// the memory limit, and the worker lives.
	if st.Result == nil || !strings.Contains(st.Result.Answer, "the code's process ran out of memory (its limit is 768 MiB") &&
		!strings.Contains(st.Result.Answer, "stuck inside a built-in function and was abandoned") {
		t.Errorf("result %+v, want the child's memory error in the answer", st.Result)
	}
	w.stop(t)
}

// scriptModel is a scripted model that sends code as one execute_code
// call, then answers with answer and what the call returned.
func scriptModel(t *testing.T, code, answer string) *llmtest.Server {
	t.Helper()
	model := llmtest.NewServer(t)
	model.Handle(func(req llmtest.RecordedRequest) llmtest.Reply {
		for _, m := range req.Messages {
			if m.Role == llm.RoleTool {
				return llmtest.Reply{Content: answer + m.Content}
			}
		}
		args, _ := json.Marshal(map[string]string{"code": code})
		return llmtest.Reply{ToolCalls: []llm.ToolCall{{Function: llm.FunctionCall{Name: agentloop.ToolExecuteCode, Arguments: string(args)}}}}
	})
	return model
}
