package agentloop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/reflect"
)

func TestContentEmbeddedToolCalls(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, content string
		wantRest      string
	}{
		{"hermes", "I will check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}\n</tool_call>", "I will check."},
		{"qwen unclosed", `<tool_call>{"name": "get_weather", "arguments": {"city": "Lima"}}`, ""},
		{"fenced json", "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}\n```", ""},
		{"bare json parameters", `{"name": "get_weather", "parameters": {"city": "Lima"}}`, ""},
		{"python tag", `<|python_tag|>{"name": "get_weather", "parameters": {"city": "Lima"}}`, ""},
		{"mistral", `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Lima"}}]`, ""},
		{"llama function tag", `<function=get_weather>{"city": "Lima"}</function>`, ""},
		{"openai shape", `{"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Lima\"}"}}`, ""},
		{"qwen3 coder xml", "<tool_call>\n<function=get_weather>\n<parameter=city>\nLima\n</parameter>\n</function>\n</tool_call>", ""},
		{"llama python tag with eom", `<|python_tag|>{"name": "get_weather", "parameters": {"city": "Lima"}}<|eom_id|>`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, textReply(tc.content), textReply("Lima is sunny."))
			l := newLoop(t, s, agentloop.Config{})
			res, err := l.Run(t.Context(), agentloop.Input{Task: "Weather in Lima?", Mode: agentloop.ModeDeferred, Tools: tools})
			if err != nil {
				t.Fatal(err)
			}
			reqs := s.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests", len(reqs))
			}
			msgs := reqs[1].Messages
			asst := msgs[len(msgs)-2]
			if len(asst.ToolCalls) != 1 || asst.ToolCalls[0].Function.Name != "get_weather" || asst.Content != tc.wantRest {
				t.Fatalf("assistant message = %s", mustJSON(t, asst))
			}
			if r := msgs[len(msgs)-1]; r.Role != llm.RoleTool || r.Content != "weather in Lima: 21c, sunny" || r.ToolCallID != asst.ToolCalls[0].ID {
				t.Fatalf("tool message = %s", mustJSON(t, r))
			}
			if res.Answer != "Lima is sunny." {
				t.Errorf("answer = %q", res.Answer)
			}
		})
	}
}

func TestJSONAnswerIsNotAToolCall(t *testing.T) {
	t.Parallel()
	var ts testServer
	tools := newToolSet(t, &ts, false)
	answer := "```json\n{\"name\": \"Lima\", \"arguments\": [\"warm\"]}\n```"
	s := llmtest.NewServer(t, textReply(answer))
	l := newLoop(t, s, agentloop.Config{})
	res, err := l.Run(t.Context(), agentloop.Input{Task: "go", Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != answer || res.StopReason != agentloop.StopFinalAnswer {
		t.Fatalf("answer = %q (%s)", res.Answer, res.StopReason)
	}
}

func TestBadArgumentsGoBackAsErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tc   llm.ToolCall
		want string
	}{
		{"truncated JSON", call("get_weather", `{"city": "Paris"`), "Error: the arguments are not valid JSON"},
		{"not an object", call("get_weather", `["Paris"]`), "Error: the arguments must be a JSON object, got an array"},
		{"a string", call("get_weather", `"Paris"`), "Error: the arguments must be a JSON object, got a string"},
		{"unknown tool", call("get_wheather", `{"city":"Paris"}`), `Error: unknown tool "get_wheather"; closest names: get_weather`},
		{"broken tagged call", llm.ToolCall{}, "Error: the arguments are not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			first := toolReply(tc.tc)
			if tc.tc.Function.Name == "" {
				first = textReply(`<tool_call>{"name": "get_weather", "arguments": {"city": Paris}}</tool_call>`)
			}
			s := llmtest.NewServer(t, first, textReply("sorry"))
			l := newLoop(t, s, agentloop.Config{})
			if _, err := l.Run(t.Context(), agentloop.Input{Task: "go", Tools: tools, Mode: agentloop.ModeFull}); err != nil {
				t.Fatal(err)
			}
			reqs := s.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2 (no retry for these)", len(reqs))
			}
			msgs := toolMessages(reqs[1].Messages)
			if len(msgs) != 1 || !strings.HasPrefix(msgs[0].Content, tc.want) {
				t.Fatalf("tool messages = %s", mustJSON(t, msgs))
			}
			if ts.calls.Load() != 0 {
				t.Error("the call reached the server")
			}
		})
	}
}

func TestMaxRoundsEndsWithToolLessRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		cap, maxRounds int
		wantRounds     int
	}{
		{"job value", 50, 2, 2},
		{"capped", 3, 40, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t)
			s.Handle(func(r llmtest.RecordedRequest) llmtest.Reply {
				if r.ToolsJSON == nil {
					return textReply("Final: partial answer.")
				}
				return toolReply(call("echo", fmt.Sprintf(`{"text":"round %d"}`, r.N)))
			})
			l := newLoop(t, s, agentloop.Config{MaxRoundsCap: tc.cap, DefaultMaxRounds: min(tc.cap, 10)})
			res, err := l.Run(t.Context(), agentloop.Input{Task: "loop forever", Tools: tools, MaxRounds: tc.maxRounds})
			if err != nil {
				t.Fatal(err)
			}
			reqs := s.Requests()
			if len(reqs) != tc.wantRounds+1 {
				t.Fatalf("%d requests, want %d", len(reqs), tc.wantRounds+1)
			}
			last := reqs[len(reqs)-1]
			if last.ToolsJSON != nil {
				t.Errorf("final request carries tools: %s", last.ToolsJSON)
			}
			if note := last.Messages[len(last.Messages)-1]; note.Role != llm.RoleUser || !strings.Contains(note.Content, "final answer") {
				t.Errorf("final request ends with %s", mustJSON(t, note))
			}
			if res.StopReason != agentloop.StopMaxRounds || res.Rounds != tc.wantRounds || res.Answer != "Final: partial answer." {
				t.Errorf("result: %s rounds=%d answer=%q", res.StopReason, res.Rounds, res.Answer)
			}
			if int(ts.calls.Load()) != tc.wantRounds {
				t.Errorf("%d tool calls, want %d", ts.calls.Load(), tc.wantRounds)
			}
		})
	}
}

// With no tools in the final request, Hermes/Qwen models often write one
// more <tool_call> into the content (and servers then do not parse it).
// That is no answer: the model is asked once more, and markup never
// becomes the job's answer.
func TestFinalAnswerIsNotAToolCall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		finals     []llmtest.Reply
		wantAnswer string
		wantErr    error
	}{
		{"tool call then answer", []llmtest.Reply{
			textReply(`<tool_call>{"name": "echo", "arguments": {"text": "again"}}</tool_call>`),
			textReply("Partial answer."),
		}, "Partial answer.", nil},
		{"text beside the call is the answer", []llmtest.Reply{
			textReply("Partial answer.\n<tool_call>{\"name\": \"echo\", \"arguments\": {\"text\": \"x\"}}</tool_call>"),
		}, "Partial answer.", nil},
		{"empty twice", []llmtest.Reply{textReply(""), textReply(`<tool_call>{"name": "echo", "arguments": {}}</tool_call>`)}, "", agentloop.ErrEmptyResponse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, append([]llmtest.Reply{toolReply(call("echo", `{"text":"a"}`))}, tc.finals...)...)
			l := newLoop(t, s, agentloop.Config{})
			res, err := l.Run(t.Context(), agentloop.Input{Task: "go", Tools: tools, MaxRounds: 1})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if res.Answer != tc.wantAnswer {
				t.Errorf("answer = %q, want %q", res.Answer, tc.wantAnswer)
			}
			reqs := s.Requests()
			if len(reqs) != 1+len(tc.finals) {
				t.Fatalf("%d requests", len(reqs))
			}
			for _, r := range reqs[1:] {
				if r.ToolsJSON != nil {
					t.Errorf("request %d carries tools", r.N)
				}
				if strings.Contains(string(r.Raw), `\"again\"`) {
					t.Errorf("request %d holds the rejected final reply", r.N)
				}
			}
			if tc.wantErr == nil {
				if res.StopReason != agentloop.StopMaxRounds || res.Messages[len(res.Messages)-1].Content != tc.wantAnswer {
					t.Errorf("stop %s, messages %s", res.StopReason, mustJSON(t, res.Messages))
				}
			}
		})
	}
}

func TestCancellationAndTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		wantStop string
		wantErr  error
	}{
		{"cancel", agentloop.StopCancelled, context.Canceled},
		{"timeout", agentloop.StopTimeout, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			block := make(chan struct{})
			t.Cleanup(func() { close(block) })
			s := llmtest.NewServer(t,
				toolReply(call("get_weather", `{"city":"Bern"}`)),
				llmtest.Reply{Content: "never", Block: block},
			)
			l := newLoop(t, s, agentloop.Config{})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			runCtx := ctx
			expire := cancel
			if errors.Is(tc.wantErr, context.DeadlineExceeded) {
				d := newExpiringContext(ctx)
				runCtx, expire = d, d.expire
			}
			// The context ends while the second request is in flight.
			go func() {
				if s.WaitRequests(ctx, 2) == nil {
					expire()
				}
			}()
			ev := &events{}
			done := make(chan struct{})
			var (
				res *agentloop.Result
				err error
			)
			go func() {
				defer close(done)
				res, err = l.Run(runCtx, agentloop.Input{Task: "go", Tools: tools, Sink: ev})
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after the context ended")
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if res.StopReason != tc.wantStop || res.Rounds != 1 {
				t.Errorf("result: %s rounds=%d", res.StopReason, res.Rounds)
			}
			// The completed round is kept; nothing half-done is.
			if n := len(res.Messages); n != 3 {
				t.Errorf("%d messages, want 3: %s", n, mustJSON(t, res.Messages))
			}
			out := ev.of(agentloop.EventLoopOutcome)
			if len(out) != 1 || out[0].Data["stop_reason"] != tc.wantStop {
				t.Errorf("outcome events = %+v", out)
			}
		})
	}
}

func TestConcurrentCallsResultsInOrder(t *testing.T) {
	t.Parallel()
	ts := testServer{meetWant: 3, meetAll: make(chan struct{})}
	tools := newToolSet(t, &ts, false)
	// The three meet calls only return once all three are running at once:
	// run one by one, they would wait until the test's deadline.
	s := llmtest.NewServer(t,
		toolReply(call("meet", `{"id":"a"}`), call("meet", `{"id":"b"}`), call("echo", `{"text":"c"}`), call("meet", `{"id":"d"}`)),
		textReply("all met"),
	)
	l := newLoop(t, s, agentloop.Config{MaxParallelCalls: 3})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := l.Run(ctx, agentloop.Input{Task: "meet", Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	msgs := toolMessages(res.Messages)
	var got []string
	for _, m := range msgs {
		got = append(got, m.Content)
	}
	if strings.Join(got, ",") != "met a,met b,c,met d" {
		t.Fatalf("results = %v", got)
	}
	asst := res.Messages[1]
	for i, m := range msgs {
		if m.ToolCallID != asst.ToolCalls[i].ID {
			t.Errorf("result %d answers %s, want %s", i, m.ToolCallID, asst.ToolCalls[i].ID)
		}
	}
}

func TestCheckpointAndResume(t *testing.T) {
	t.Parallel()
	var ts testServer
	tools := newToolSet(t, &ts, false)
	store := &checkpoints{}
	s1 := llmtest.NewServer(t,
		toolReply(call("echo", `{"text":"one"}`)),
		toolReply(call("echo", `{"text":"two"}`)),
		llmtest.Reply{Status: 400, Content: "model crashed"},
	)
	l1 := newLoop(t, s1, agentloop.Config{})
	in := agentloop.Input{Task: "count", System: "Be brief.", Tools: tools, Checkpoints: store, Mode: agentloop.ModeDeferred}
	res1, err := l1.Run(t.Context(), in)
	if err == nil || res1.StopReason != agentloop.StopError || !strings.Contains(err.Error(), "model crashed") {
		t.Fatalf("first run: %v (%s)", err, res1.StopReason)
	}
	if len(store.states) != 2 || store.states[0].Round != 1 || store.states[1].Round != 2 {
		t.Fatalf("checkpoints = %+v", store.states)
	}
	saved := store.states[1]
	if mustJSON(t, withoutNames(saved.Messages)) != mustJSON(t, s1.Requests()[2].Messages) {
		t.Fatalf("saved messages differ from what the model saw last:\n%s\n%s", mustJSON(t, saved.Messages), mustJSON(t, s1.Requests()[2].Messages))
	}

	// A new worker resumes: only the remaining round is asked for.
	s2 := llmtest.NewServer(t, textReply("one two"))
	l2 := newLoop(t, s2, agentloop.Config{})
	in.Resume = &saved
	res2, err := l2.Run(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	reqs := s2.Requests()
	if len(reqs) != 1 || mustJSON(t, reqs[0].Messages) != mustJSON(t, withoutNames(saved.Messages)) {
		t.Fatalf("resumed requests = %d, first = %s", len(reqs), mustJSON(t, reqs[0].Messages))
	}
	if res2.Answer != "one two" || res2.Rounds != 2 || res2.Mode != agentloop.ModeDeferred {
		t.Errorf("resumed result: %q rounds=%d mode=%s", res2.Answer, res2.Rounds, res2.Mode)
	}
	if res2.Usage.PromptTokens <= saved.Usage.PromptTokens {
		t.Errorf("usage did not continue from the checkpoint: %d <= %d", res2.Usage.PromptTokens, saved.Usage.PromptTokens)
	}
	if ts.calls.Load() != 2 {
		t.Errorf("tools ran %d times, want 2 (none re-run)", ts.calls.Load())
	}
}

func TestToolOutputTruncated(t *testing.T) {
	t.Parallel()
	var ts testServer
	tools := newToolSet(t, &ts, false)
	s := llmtest.NewServer(t, toolReply(call("echo", `{"text":"0123456789","repeat":100}`)), textReply("long"))
	ev := &events{}
	l := newLoop(t, s, agentloop.Config{MaxToolOutput: 300})
	res, err := l.Run(t.Context(), agentloop.Input{Task: "go", Tools: tools, Sink: ev})
	if err != nil {
		t.Fatal(err)
	}
	got := toolMessages(res.Messages)[0].Content
	if len(got) > 300 || !strings.HasPrefix(got, "0123456789") || !strings.Contains(got, "[output truncated: the first ") || !strings.Contains(got, "of 1000 bytes are shown]") {
		t.Fatalf("tool message (%d bytes) = %q", len(got), got)
	}
	r := ev.of(agentloop.EventToolResult)
	if len(r) != 1 || len(r[0].Data["output"].(string)) != 1000 || r[0].Data["truncated_for_model"] != true || r[0].Data["size"] != 1000 {
		t.Fatalf("tool.result event = %+v", r)
	}
}

// A reflected transcript is history for a continuation: an output
// reached through call_tool (or a client tool) must be what the model saw,
// truncated like a direct call's, not the whole of it.
func TestRecordsHoldTruncatedOutput(t *testing.T) {
	t.Parallel()
	var ts testServer
	tools := newToolSet(t, &ts, false)
	s := llmtest.NewServer(t,
		toolReply(call("call_tool", `{"name":"echo","arguments":{"text":"0123456789","repeat":100}}`), call("ask_user", `{}`)),
		textReply("long"))
	ev := &events{}
	l := newLoop(t, s, agentloop.Config{MaxToolOutput: 300})
	res, err := l.Run(t.Context(), agentloop.Input{
		Task: "go", Tools: tools, Sink: ev, Mode: agentloop.ModeSearch,
		ClientTools:  []clienttools.Decl{{Name: "ask_user"}},
		ClientCaller: func(context.Context, string, json.RawMessage) (string, error) { return strings.Repeat("x", 1000), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	msgs := toolMessages(res.Messages)
	if len(res.Records) != 2 || len(msgs) != 2 {
		t.Fatalf("records %s", mustJSON(t, res.Records))
	}
	for i, r := range res.Records {
		if *r.Output != msgs[i].Content || len(*r.Output) > 300 {
			t.Errorf("record %d output (%d bytes) differs from what the model saw (%d bytes)", i, len(*r.Output), len(msgs[i].Content))
		}
	}
	for _, m := range toolMessages(reflect.Rewrite(res.Messages, res.Records)) {
		if len(m.Content) > 300 {
			t.Errorf("reflected result of %s is %d bytes", m.Name, len(m.Content))
		}
	}
	for _, e := range ev.of(agentloop.EventToolResult) {
		if len(e.Data["output"].(string)) != 1000 {
			t.Errorf("tool.result event of %s lost the full output", e.Data["name"])
		}
	}
}

func TestClientToolsAndClash(t *testing.T) {
	t.Parallel()
	var ts testServer
	tools := newToolSet(t, &ts, false)
	s := llmtest.NewServer(t,
		toolReply(call("ask_user", `{"question":"Which city?"}`), call("ask_user", `{"question":42}`), call("echo", `{"text":"server"}`)),
		textReply("Berlin"),
	)
	ev := &events{}
	var (
		mu    sync.Mutex
		asked []string
	)
	l := newLoop(t, s, agentloop.Config{SchemaRetries: -1})
	res, err := l.Run(t.Context(), agentloop.Input{
		Task: "go", Tools: tools, Sink: ev, Mode: agentloop.ModeFull,
		ClientTools: []clienttools.Decl{
			{Name: "ask_user", Description: "Ask the user.", InputSchema: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string"}},"required":["question"]}`)},
			{Name: "echo", Description: "Client echo (shadowed by the server's)."},
		},
		ClientCaller: func(_ context.Context, name string, args json.RawMessage) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, name+string(args))
			return "Berlin", nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	sent := s.Requests()[0].Tools
	if ask, ok := toolByName(sent, "ask_user"); !ok || !strings.Contains(string(ask.Parameters), "question") {
		t.Fatalf("client tool not offered: %s", mustJSON(t, sent))
	}
	if echo, _ := toolByName(sent, "echo"); echo.Description != "Echo text back, optionally repeated." {
		t.Errorf("clash: echo = %+v, want the server's", echo)
	}
	if c := ev.of(agentloop.EventToolClash); len(c) != 1 || c[0].Data["name"] != "echo" {
		t.Errorf("clash events = %+v", c)
	}
	if strings.Join(asked, "|") != `ask_user{"question":"Which city?"}` {
		t.Errorf("client caller got %v (the invalid call must not reach it)", asked)
	}
	msgs := toolMessages(res.Messages)
	if msgs[0].Content != "Berlin" || !strings.Contains(msgs[1].Content, "at '/question': got number, want string") || msgs[2].Content != "server" {
		t.Errorf("results = %s", mustJSON(t, msgs))
	}
	if len(res.Records) != 1 || res.Records[0].Kind != reflect.KindClientTool || res.Records[0].Name != "ask_user" ||
		res.Records[0].CallID != msgs[0].ToolCallID || *res.Records[0].Output != "Berlin" {
		t.Errorf("records = %s", mustJSON(t, res.Records))
	}
}

func TestClientToolThroughCallTool(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t,
		toolReply(call("call_tool", `{"name":"ask_user","arguments":{"question":"Sure?"}}`)),
		textReply("yes"),
	)
	l := newLoop(t, s, agentloop.Config{})
	res, err := l.Run(t.Context(), agentloop.Input{
		Task: "go", Mode: agentloop.ModeSearch,
		ClientTools:  []clienttools.Decl{{Name: "ask_user", InputSchema: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string"}}}`)}},
		ClientCaller: func(context.Context, string, json.RawMessage) (string, error) { return "yes", nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 1 || res.Records[0].Kind != reflect.KindCallTool || res.Records[0].Name != "ask_user" || string(res.Records[0].Input) != `{"question":"Sure?"}` {
		t.Errorf("records = %s", mustJSON(t, res.Records))
	}
}

func TestResourceBridge(t *testing.T) {
	t.Parallel()
	for _, withResources := range []bool{true, false} {
		t.Run(fmt.Sprint(withResources), func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, withResources)
			s := llmtest.NewServer(t)
			s.Handle(func(r llmtest.RecordedRequest) llmtest.Reply {
				switch r.N {
				case 1:
					if _, ok := toolByName(r.Tools, "mcp_list_resources"); !ok {
						return textReply("no resources")
					}
					return toolReply(call("mcp_list_resources", `{}`), call("mcp_read_resource", `{"uri":"file:///notes.txt"}`))
				}
				return textReply("read")
			})
			l := newLoop(t, s, agentloop.Config{})
			res, err := l.Run(t.Context(), agentloop.Input{Task: "notes?", Tools: tools, Mode: agentloop.ModeDeferred})
			if err != nil {
				t.Fatal(err)
			}
			if !withResources {
				if res.Answer != "no resources" {
					t.Errorf("bridge offered without resources")
				}
				return
			}
			msgs := toolMessages(res.Messages)
			if len(msgs) != 2 || !strings.Contains(msgs[0].Content, `"uri":"file:///notes.txt"`) || msgs[1].Content != "buy milk" {
				t.Errorf("results = %s", mustJSON(t, msgs))
			}
		})
	}
}

func TestEmptyAndRefusedResponses(t *testing.T) {
	t.Parallel()
	t.Run("nudged once", func(t *testing.T) {
		t.Parallel()
		s := llmtest.NewServer(t, textReply(""), textReply("here"))
		l := newLoop(t, s, agentloop.Config{})
		res, err := l.Run(t.Context(), agentloop.Input{Task: "go"})
		if err != nil {
			t.Fatal(err)
		}
		reqs := s.Requests()
		if res.Answer != "here" || len(reqs) != 2 || len(res.Messages) != 2 {
			t.Fatalf("answer %q, %d requests, messages %s", res.Answer, len(reqs), mustJSON(t, res.Messages))
		}
		if n := reqs[1].Messages[len(reqs[1].Messages)-1]; !strings.Contains(n.Content, "empty") {
			t.Errorf("nudge = %+v", n)
		}
	})
	t.Run("empty twice", func(t *testing.T) {
		t.Parallel()
		s := llmtest.NewServer(t, textReply("  "), textReply(""))
		l := newLoop(t, s, agentloop.Config{})
		res, err := l.Run(t.Context(), agentloop.Input{Task: "go"})
		if !errors.Is(err, agentloop.ErrEmptyResponse) || res.StopReason != agentloop.StopError {
			t.Fatalf("err = %v, stop %s", err, res.StopReason)
		}
	})
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		s := llmtest.NewServer(t, llmtest.Reply{Content: "I cannot help with that.", FinishReason: "content_filter"})
		l := newLoop(t, s, agentloop.Config{})
		res, err := l.Run(t.Context(), agentloop.Input{Task: "go"})
		if !errors.Is(err, agentloop.ErrRefused) || res.StopReason != agentloop.StopError {
			t.Fatalf("err = %v, stop %s", err, res.StopReason)
		}
	})
}

// OpenAI states a refusal in message.refusal, with no content and
// finish_reason "stop": a refusal, not an empty reply to nudge.
func TestRefusalField(t *testing.T) {
	t.Parallel()
	body := `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":null,"refusal":"I can't help with that request."}}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`
	s := llmtest.NewServer(t, llmtest.Reply{Body: body}, llmtest.Reply{Body: body})
	l := newLoop(t, s, agentloop.Config{})
	res, err := l.Run(t.Context(), agentloop.Input{Task: "go"})
	if !errors.Is(err, agentloop.ErrRefused) || !strings.Contains(err.Error(), "I can't help with that request.") || res.StopReason != agentloop.StopError {
		t.Fatalf("err = %v, stop %s", err, res.StopReason)
	}
	if n := len(s.Requests()); n != 1 {
		t.Errorf("%d requests, want 1 (a refusal is not nudged)", n)
	}
	if res.Usage.PromptTokens != 3 {
		t.Errorf("usage = %+v", res.Usage)
	}
}

// Some OpenAI-compatible servers send function.arguments as a JSON object
// instead of a string holding one: the arguments must still arrive, never
// as a silent {}.
func TestArgumentsAsObject(t *testing.T) {
	t.Parallel()
	var ts testServer
	tools := newToolSet(t, &ts, false)
	body := `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":{"city":"Lima"}}}]}}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`
	s := llmtest.NewServer(t, llmtest.Reply{Body: body}, textReply("sunny"))
	l := newLoop(t, s, agentloop.Config{})
	if _, err := l.Run(t.Context(), agentloop.Input{Task: "go", Tools: tools, Mode: agentloop.ModeDeferred}); err != nil {
		t.Fatal(err)
	}
	msgs := toolMessages(s.Requests()[1].Messages)
	if len(msgs) != 1 || msgs[0].Content != "weather in Lima: 21c, sunny" {
		t.Fatalf("tool messages = %s", mustJSON(t, msgs))
	}
}

func TestEventsOfARound(t *testing.T) {
	t.Parallel()
	var ts testServer
	tools := newToolSet(t, &ts, false)
	s := llmtest.NewServer(t, toolReply(call("fail", `{}`)), textReply("failed"))
	ev := &events{}
	l := newLoop(t, s, agentloop.Config{})
	if _, err := l.Run(t.Context(), agentloop.Input{JobID: "j1", Task: "go", Tools: tools, Sink: ev, Mode: agentloop.ModeDeferred}); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range ev.all {
		types = append(types, fmt.Sprintf("%s@%d", e.Type, e.Round))
	}
	want := "llm.request@1 llm.response@1 tool.call@1 tool.result@1 llm.request@2 llm.response@2 loop.outcome@1"
	if strings.Join(types, " ") != want {
		t.Fatalf("events = %v\nwant %s", types, want)
	}
	req := ev.of(agentloop.EventLLMRequest)[0].Data
	if req["mode"] != "deferred" || req["message_count"] != 1 || req["tool_def_tokens"].(int) <= 0 {
		t.Errorf("llm.request = %+v", req)
	}
	resp := ev.of(agentloop.EventLLMResponse)[0].Data
	if resp["finish_reason"] != "tool_calls" || resp["prompt_tokens"].(int64) <= 0 {
		t.Errorf("llm.response = %+v", resp)
	}
	r := ev.of(agentloop.EventToolResult)[0].Data
	if r["error"] != true || r["output"] != "Error: the backend is down" || r["name"] != "fail" {
		t.Errorf("tool.result = %+v", r)
	}
	out := ev.of(agentloop.EventLoopOutcome)[0].Data
	if out["stop_reason"] != "final_answer" || out["tool_def_tokens"].(int64) <= 0 || out["full_mode_tool_def_tokens"].(int64) <= out["tool_def_tokens"].(int64) {
		t.Errorf("loop.outcome = %+v", out)
	}
}

// expiringContext is a context whose deadline passes when the test says
// so: a timeout without a wall-clock race.
type expiringContext struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newExpiringContext(parent context.Context) *expiringContext {
	return &expiringContext{Context: parent, done: make(chan struct{})}
}

func (c *expiringContext) expire() { c.once.Do(func() { close(c.done) }) }

func (c *expiringContext) Done() <-chan struct{} { return c.done }

func (c *expiringContext) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
