package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
	"github.com/jetagent/jetagent/schemas"
)

// continuationModel: a task "first" calls a server tool (add), another
// through call_tool (get_weather) and a client tool (ask_user) in one
// round, then answers; any other task is answered at once.
func continuationModel(req llmtest.RecordedRequest) llmtest.Reply {
	task := lastUser(req.Messages)
	if task != "first" {
		return llmtest.Reply{Content: "continued: " + task}
	}
	var results []string
	for _, m := range afterLastUser(req.Messages) {
		if m.Role == llm.RoleTool {
			results = append(results, m.Content)
		}
	}
	if len(results) > 0 {
		return llmtest.Reply{Content: "first done: " + strings.Join(results, " | ")}
	}
	return llmtest.Reply{ToolCalls: []llm.ToolCall{
		{ID: "call_add", Function: llm.FunctionCall{Name: "add", Arguments: `{"a":20,"b":22}`}},
		{ID: "call_weather", Function: llm.FunctionCall{Name: "call_tool", Arguments: `{"name":"get_weather","arguments":{"city":"Porto"}}`}},
		{ID: "call_ask", Function: llm.FunctionCall{Name: "ask_user", Arguments: `{"question":"which city next?"}`}},
	}}
}

// TestContinuation takes the reflected transcript of a finished job as the
// history of a new job (submitted with `submit --job FILE`) and checks what
// the model then receives: one system prompt, the earlier calls under their
// real names, each tool message answering a preceding call, and the new
// task as the last user message.
func TestContinuation(t *testing.T) {
	const system = "You are the continuation test agent."
	needSubmit(t)
	h := startClientWorker(t, continuationModel, map[string]string{"JETAGENT_SYSTEM_PROMPT": system})
	ctx := natstest.Context(t)

	first := clientJob(t, "cont-first", "ask_user")
	first.Task, first.ToolMode, first.Servers = "first", "search", []string{"demo"}
	serveClient(t, ctx, h.nc, first, func(context.Context, string, json.RawMessage) (string, bool, error) {
		return "Braga", false, nil
	})
	if _, err := h.client.Submit(ctx, first); err != nil {
		t.Fatal(err)
	}
	if st, err := h.client.Wait(ctx, first.ID); err != nil || st.Status != jobs.StatusSucceeded {
		t.Fatalf("first job: %+v %v", st, err)
	}
	refl, _ := h.transcript(t, ctx, first.ID, false)

	// The continuation, as a user would write it: the reflected messages
	// as history, a new task.
	next := map[string]any{
		"id": "cont-next", "task": "and the weather in Braga?", "servers": []string{"demo"}, "tool_mode": "full",
		"history": refl.Messages,
	}
	b, err := json.Marshal(next)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.v.Validate(schemas.Job, b); err != nil {
		t.Fatalf("the continuation fails the job schema: %v", err)
	}
	file := filepath.Join(t.TempDir(), "next.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	before := len(h.model.Requests())
	code, stdout, stderr := h.submit(t, ctx, "--job", file)
	if code != 0 || stdout != "continued: and the weather in Braga?\n" {
		t.Fatalf("submit --job: exit %d\nstdout %q\nstderr %s", code, stdout, stderr)
	}

	reqs := h.model.Requests()
	if len(reqs) != before+1 {
		t.Fatalf("%d model requests for the continuation, want 1", len(reqs)-before)
	}
	got := reqs[len(reqs)-1].Messages
	checkConsistent(t, "continuation request", got)
	var systems int
	for _, m := range got {
		if m.Role == llm.RoleSystem {
			systems++
		}
	}
	if systems != 1 || got[0].Role != llm.RoleSystem || got[0].Content != system {
		t.Errorf("%d system messages, first %+v; want one, first", systems, got[0])
	}
	if last := got[len(got)-1]; last.Role != llm.RoleUser || last.Content != "and the weather in Braga?" {
		t.Errorf("last message %+v, want the new task", last)
	}
	// The earlier job's calls, under their real names, with their results.
	calls, results := toolCalls(got)
	if names := callNames(calls); names != "add get_weather ask_user" {
		t.Errorf("calls in the history: %s", names)
	}
	for _, c := range calls {
		if c.Function.Name == "get_weather" && c.Function.Arguments != `{"city":"Porto"}` {
			t.Errorf("get_weather arguments %s", c.Function.Arguments)
		}
	}
	if results["call_add"].Content != "42" || results["call_ask"].Content != "Braga" || !strings.Contains(results["call_weather"].Content, "Porto") {
		t.Errorf("results in the history: %+v", results)
	}
	// The earlier turn's text is there too, in order.
	var users []string
	for _, m := range got {
		if m.Role == llm.RoleUser {
			users = append(users, m.Content)
		}
	}
	if strings.Join(users, " / ") != "first / and the weather in Braga?" {
		t.Errorf("user messages %q", users)
	}

	// The continuation's own transcript holds the whole conversation and is
	// itself valid history.
	tr, _ := h.transcript(t, ctx, "cont-next", false)
	checkConsistent(t, "continuation transcript", tr.Messages)
	if n := len(tr.Messages); n != len(got)+1 || tr.Messages[n-1].Content != "continued: and the weather in Braga?" {
		t.Errorf("continuation transcript has %d messages (request %d)", n, len(got))
	}

	// One system prompt whichever way the continuation is written.
	for _, tt := range []struct {
		name, system string
		history      []llm.Message
		want         string
	}{
		{"the job's own prompt supersedes the history's", "Answer in one word.", refl.Messages, "Answer in one word."},
		{"history without its prompt gets the default", "", refl.Messages[1:], system},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := natstest.Context(t)
			rc, err := h.client.Submit(ctx, &jobs.Job{Task: "again", System: tt.system, History: tt.history, Servers: []string{"demo"}})
			if err != nil {
				t.Fatal(err)
			}
			if st, err := h.client.Wait(ctx, rc.ID); err != nil || st.Status != jobs.StatusSucceeded {
				t.Fatalf("%+v %v", st, err)
			}
			reqs := h.model.Requests()
			got := reqs[len(reqs)-1].Messages
			checkConsistent(t, "request", got)
			var prompts []string
			for _, m := range got {
				if m.Role == llm.RoleSystem {
					prompts = append(prompts, m.Content)
				}
			}
			if len(prompts) != 1 || got[0].Content != tt.want {
				t.Errorf("system prompts %q, want [%q] first", prompts, tt.want)
			}
		})
	}
}
