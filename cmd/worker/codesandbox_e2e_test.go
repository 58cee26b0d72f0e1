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
// (codemode's TestConversionErrorHoldsTheObjectsStrings): 64 properties
// of a null-prototype object holding one string of 32 Mi characters.
const oomScript = `const s = "x".repeat(32 << 20), o = Object.create(null);
for (let i = 0; i < 64; i++) o["k" + i] = s;
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
	model := llmtest.NewServer(t)
	model.Handle(func(req llmtest.RecordedRequest) llmtest.Reply {
		for _, m := range req.Messages {
			if m.Role == llm.RoleTool {
				return llmtest.Reply{Content: "The script failed: " + m.Content}
			}
		}
		args, _ := json.Marshal(map[string]string{"code": oomScript})
		return llmtest.Reply{ToolCalls: []llm.ToolCall{{Function: llm.FunctionCall{Name: agentloop.ToolExecuteCode, Arguments: string(args)}}}}
	})
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
	if st.Result == nil || !strings.Contains(st.Result.Answer, "the code's process ran out of memory (its limit is 768 MiB") {
		t.Errorf("result %+v, want the child's memory error in the answer", st.Result)
	}
	w.stop(t)
}
