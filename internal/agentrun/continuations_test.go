package agentrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/agentrun"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// continuationPool serves echo, fail, big (an output over the job's
// MaxToolOutput), empty (no text) and get.env (a server name the model
// calls get_env) from an in-process mcp-go server through a real pool.
func continuationPool(t *testing.T) *toolcache.Pool {
	t.Helper()
	s := server.NewMCPServer("x", "1.0.0", server.WithToolCapabilities(true))
	text := func(out string) server.ToolHandlerFunc {
		return func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(out), nil
		}
	}
	object := json.RawMessage(`{"type":"object"}`)
	s.AddTool(mcp.NewToolWithRawSchema("echo", "Echo.", json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("echo:" + req.GetString("text", "")), nil
		})
	s.AddTool(mcp.NewToolWithRawSchema("fail", "Fail.", object), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError("down"), nil
	})
	s.AddTool(mcp.NewToolWithRawSchema("big", "Big.", object), text(strings.Repeat("é", 3000)))
	s.AddTool(mcp.NewToolWithRawSchema("empty", "Empty.", object), text(""))
	s.AddTool(mcp.NewToolWithRawSchema("get.env", "Dotted.", object), text("env"))
	return inProcessPool(t, "x", s)
}

func named(name, args string) llm.ToolCall {
	return llm.ToolCall{Function: llm.FunctionCall{Name: name, Arguments: args}}
}

// The stored (reflected) transcript of a job in every mode, through NATS
// with a real MCP pool and client tools answered by the submitter, is a
// history the job door takes and the next job, in every other mode, shows
// the model as it was stored: each call answered once, in order, by a
// result with its id; ids unique; arguments one JSON object; the real
// calls in the place of call_tool and of execute_code calls that reached
// a tool (a script that reached none, and meta tools, stay as they were),
// outputs cut for the model as it saw them. The raw transcript keeps the
// meta calls.
func TestStoredTranscriptsContinueInEveryMode(t *testing.T) {
	t.Parallel()
	const secret = "0123456789abcdef0123456789abcdef"
	ask := clienttools.Decl{Name: "ask_user", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)}
	for _, tc := range []struct {
		name, mode string
		retries    int // Config.SchemaRetries (0: none)
		replies    []llmtest.Reply
		raw        []string // the calls of the raw transcript
		reflected  []string // and of the reflected one
	}{
		{name: "full", mode: "full", replies: []llmtest.Reply{
			{ToolCalls: []llm.ToolCall{named("echo", `{"text":"日本 ☃"}`), named("fail", `{}`), named("big", `{}`), named("get_env", ``), named("empty", `null`), named("ask_user", `{"q":"city?"}`)}},
		}, raw: []string{"echo", "fail", "big", "get_env", "empty", "ask_user"}, reflected: []string{"echo", "fail", "big", "get_env", "empty", "ask_user"}},
		{name: "deferred with a schema retry", mode: "deferred", retries: 1, replies: []llmtest.Reply{
			{ToolCalls: []llm.ToolCall{named("echo", `{"text":1}`)}},
			{ToolCalls: []llm.ToolCall{named("echo", `{"text":"ok"}`), named("ask_user", `{"q":"a"}`)}},
		}, raw: []string{"echo", "ask_user"}, reflected: []string{"echo", "ask_user"}},
		{name: "search with a schema retry", mode: "search", retries: 1, replies: []llmtest.Reply{
			{ToolCalls: []llm.ToolCall{named("search_tools", `{"query":"echo"}`)}},
			{ToolCalls: []llm.ToolCall{named("call_tool", `{"name":"echo","arguments":{"text":1}}`), named("call_tool", `{"name":"big"}`)}},
			{ToolCalls: []llm.ToolCall{named("call_tool", `{"name":"echo","arguments":{"text":"ok"}}`), named("call_tool", `{"name":"big"}`),
				named("call_tool", `{"name":"get.env","arguments":{}}`), named("call_tool", `{"name":"ask_user","arguments":{"q":"b"}}`), named("echo", `{"text":"direct"}`)}},
		}, raw: []string{"search_tools", "call_tool", "call_tool", "call_tool", "call_tool", "echo"}, reflected: []string{"search_tools", "echo", "big", "get_env", "ask_user", "echo"}},
		{name: "code", mode: "code", replies: []llmtest.Reply{
			{ToolCalls: []llm.ToolCall{
				named("execute_code", `{"code":"await tools.echo({text: 'ü'}); await tools.big({}); throw new Error('boom')"}`),
				named("execute_code", `{"code":"return 1"}`),
				named("execute_code", `{"code":"return [await tools.empty({}), await tools.get_env({}), await tools.ask_user({q: 'c'})]"}`),
				named("search_tools", `{"query":"echo"}`),
				named("echo", `{"text":"direct"}`),
			}},
		}, raw: []string{"execute_code", "execute_code", "execute_code", "search_tools", "echo"}, reflected: []string{"echo", "big", "execute_code", "empty", "get_env", "ask_user", "search_tools", "echo"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := continuationPool(t)
			retries := tc.retries
			if retries == 0 {
				retries = -1
			}
			const maxOut = 1024
			h := start(t, agentloop.Config{SchemaRetries: retries, MaxToolOutput: maxOut}, agentrun.Config{Pool: pool},
				append(tc.replies, llmtest.Reply{Content: "done"})...)
			stop, err := clienttools.Serve(t.Context(), h.nc, "first", secret, func(_ context.Context, _ string, args json.RawMessage) (string, bool, error) {
				return "answer to " + string(args), false, nil
			}, clienttools.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			st := h.run(t, &jobs.Job{ID: "first", Task: "go", ToolMode: tc.mode, ClientTools: []clienttools.Decl{ask}, ClientSecret: secret})
			if st.Status != jobs.StatusSucceeded {
				t.Fatalf("first job: %s %s", st.Status, st.Error)
			}
			stored := func(raw bool) []llm.Message {
				t.Helper()
				tr, _ := h.transcript(t, "first", raw)
				return tr.Messages
			}
			for _, raw := range []bool{true, false} {
				msgs, want := stored(raw), tc.reflected
				if raw {
					want = tc.raw
				}
				if got := callNames(msgs); !slices.Equal(got, want) {
					t.Errorf("raw=%v: calls %q, want %q", raw, got, want)
				}
				if bad := historyFaults(msgs, maxOut); len(bad) > 0 {
					t.Errorf("raw=%v: %s", raw, strings.Join(bad, "; "))
				}
			}
			history := stored(false)
			for i, mode := range []string{"full", "deferred", "search", "code"} {
				if mode == tc.mode {
					continue
				}
				id := fmt.Sprintf("next%d", i)
				h.model.Push(llmtest.Reply{Content: "continued"})
				st := h.run(t, &jobs.Job{ID: id, Task: "and then?", ToolMode: mode, History: history})
				if st.Status != jobs.StatusSucceeded || st.Result == nil || st.Result.Answer != "continued" {
					t.Errorf("continued in %s: %s %s", mode, st.Status, st.Error)
					continue
				}
				reqs := h.model.Requests()
				shown := reqs[len(reqs)-1].Messages
				if len(shown) != len(history)+1 || !sameCalls(shown[:len(history)], history) {
					t.Errorf("continued in %s: the model was shown\n%s\nnot the stored history\n%s", mode, mustMarshal(t, shown), mustMarshal(t, history))
				}
			}
		})
	}
}

func callNames(msgs []llm.Message) []string {
	var names []string
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			names = append(names, c.Function.Name)
		}
	}
	return names
}

// historyFaults says how msgs fails to be a history a model takes back as
// it is: each turn of calls answered right after it, once per call, in
// order; ids unique; arguments one JSON object; no result longer than
// maxOut (cut for the model) or empty.
func historyFaults(msgs []llm.Message, maxOut int) []string {
	var bad []string
	if err := llm.CheckHistory(msgs); err != nil {
		bad = append(bad, err.Error())
	}
	ids := map[string]bool{}
	var pending []string
	for i, m := range msgs {
		if m.Role == llm.RoleTool {
			switch {
			case len(pending) == 0 || pending[0] != m.ToolCallID:
				bad = append(bad, fmt.Sprintf("message %d answers %q, not the next call %v", i, m.ToolCallID, pending))
			case len(m.Content) > maxOut || strings.TrimSpace(m.Content) == "":
				bad = append(bad, fmt.Sprintf("message %d holds %d bytes", i, len(m.Content)))
			}
			if len(pending) > 0 {
				pending = pending[1:]
			}
			continue
		}
		if len(pending) > 0 {
			bad = append(bad, fmt.Sprintf("calls %v unanswered at message %d", pending, i))
		}
		pending = nil
		for _, c := range m.ToolCalls {
			if ids[c.ID] {
				bad = append(bad, fmt.Sprintf("id %q used again in message %d", c.ID, i))
			}
			ids[c.ID] = true
			var obj map[string]any
			if json.Unmarshal([]byte(c.Function.Arguments), &obj) != nil || obj == nil {
				bad = append(bad, fmt.Sprintf("message %d: arguments %q of %s", i, c.Function.Arguments, c.Function.Name))
			}
			pending = append(pending, c.ID)
		}
	}
	return bad
}

// sameCalls reports whether a and b hold the same messages as far as a
// model reads them: roles, text, calls and the ids results answer.
func sameCalls(a, b []llm.Message) bool {
	return slices.EqualFunc(a, b, func(x, y llm.Message) bool {
		return x.Role == y.Role && x.Content == y.Content && x.ToolCallID == y.ToolCallID &&
			slices.EqualFunc(x.ToolCalls, y.ToolCalls, func(p, q llm.ToolCall) bool { return p.ID == q.ID && p.Function == q.Function })
	})
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// transcript reads job id's stored transcript (the raw one when raw), as
// decoded and as stored.
func (h *harness) transcript(t *testing.T, id string, raw bool) (jobs.Transcript, string) {
	t.Helper()
	b, err := h.client.Transcript(natstest.Context(t), id, raw)
	if err != nil {
		t.Fatal(err)
	}
	var tr jobs.Transcript
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatal(err)
	}
	return tr, string(b)
}
