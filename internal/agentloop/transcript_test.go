package agentloop_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/reflect"
)

// checkChatHistory reports how msgs fails to be a chat history an
// OpenAI-compatible server takes back: known roles; every tool call with
// an id used by no other call, type "function", a name and arguments that
// are one JSON object; every assistant turn of calls followed directly by
// one tool message for each of its calls and nothing else in between;
// no tool message anywhere else (an orphan). final: it ends with an
// assistant message without calls.
func checkChatHistory(msgs []llm.Message, final bool) []string {
	var bad []string
	ids := map[string]int{}
	var pending []string // ids of the last assistant turn not answered yet
	open := false        // inside the tool messages of a turn of calls
	for i, m := range msgs {
		switch m.Role {
		case llm.RoleSystem, llm.RoleUser:
			if len(pending) > 0 {
				bad = append(bad, fmt.Sprintf("message %d (%s) comes before calls %v are answered", i, m.Role, pending))
			}
			pending, open = nil, false
		case llm.RoleAssistant:
			if len(pending) > 0 {
				bad = append(bad, fmt.Sprintf("message %d (assistant) comes before calls %v are answered", i, pending))
			}
			pending, open = nil, len(m.ToolCalls) > 0
			for k, c := range m.ToolCalls {
				where := fmt.Sprintf("message %d call %d (%q)", i, k, c.ID)
				if c.ID == "" {
					bad = append(bad, where+": no id")
				}
				if prev, dup := ids[c.ID]; dup {
					bad = append(bad, fmt.Sprintf("%s: id already used in message %d", where, prev))
				}
				ids[c.ID] = i
				if c.Type != "function" {
					bad = append(bad, fmt.Sprintf("%s: type %q", where, c.Type))
				}
				if c.Function.Name == "" {
					bad = append(bad, where+": no name")
				}
				var obj map[string]json.RawMessage
				if err := json.Unmarshal([]byte(c.Function.Arguments), &obj); err != nil || obj == nil {
					bad = append(bad, fmt.Sprintf("%s: arguments %q are not one JSON object", where, c.Function.Arguments))
				}
				pending = append(pending, c.ID)
			}
		case llm.RoleTool:
			k := slices.Index(pending, m.ToolCallID)
			if !open || k < 0 {
				bad = append(bad, fmt.Sprintf("message %d: tool result for %q answers no call of the turn before it", i, m.ToolCallID))
				continue
			}
			pending = slices.Delete(pending, k, k+1)
		default:
			bad = append(bad, fmt.Sprintf("message %d: role %q", i, m.Role))
		}
	}
	if len(pending) > 0 {
		bad = append(bad, fmt.Sprintf("calls %v are never answered", pending))
	}
	if final {
		if n := len(msgs); n == 0 || msgs[n-1].Role != llm.RoleAssistant || len(msgs[n-1].ToolCalls) > 0 {
			bad = append(bad, "it does not end with the assistant's answer")
		}
	}
	return bad
}

// checkRecords reports records that no call of msgs (the raw transcript)
// caused: reflection would have nothing to rewrite for them.
func checkRecords(msgs []llm.Message, recs []reflect.Record) []string {
	ids := map[string]bool{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			ids[c.ID] = true
		}
	}
	var bad []string
	for i, r := range recs {
		if !ids[r.CallID] {
			bad = append(bad, fmt.Sprintf("record %d (%s %s) names call %q, which no message has", i, r.Kind, r.Name, r.CallID))
		}
	}
	for _, ig := range reflect.Ignore(recs) {
		bad = append(bad, fmt.Sprintf("record %s of call %q not reflected: %s", ig.Record.Name, ig.Record.CallID, ig.Reason))
	}
	return bad
}

// idCall is a scripted call with its id as the model sent it.
func idCall(id, name, args string) llm.ToolCall {
	c := call(name, args)
	c.ID = id
	return c
}

// The stored transcripts of a job are chat histories a model can be given
// again: the raw one (what the model saw) and the reflected one (indirect
// calls rewritten, which the worker stores and a continuation's history
// is), whatever ids, names and arguments the model sent and whichever
// tools the calls went through. The reflected transcript is then given as
// the history of a continuation, whose model repeats the same replies
// (the same ids again), and both of its transcripts are checked too.
func TestTranscriptsAreChatHistories(t *testing.T) {
	t.Parallel()
	ask := clienttools.Decl{Name: "ask_user", Description: "Ask the user.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string"}},"required":["question"]}`)}
	shadow := clienttools.Decl{Name: "echo", Description: "A client echo the server's shadows."}
	long := strings.Repeat("x", 5000)
	for _, tc := range []struct {
		name      string
		mode      agentloop.Mode
		replies   []llmtest.Reply
		maxRounds int
		client    bool // the job declares ask_user and echo
		retries   int  // Config.SchemaRetries (0: -1, none)
		// failing: the job fails (its transcripts, stored with the
		// error, need not end with an answer; it is not continued).
		failing bool
	}{
		{name: "parallel direct calls, an unknown tool, bad arguments", mode: agentloop.ModeFull, replies: []llmtest.Reply{
			toolReply(call("get_weather", `{"city":"Lima"}`), call("get_weather", `{"city":42}`), call("no_such_tool", `{}`),
				call("echo", `[1,2]`), call("echo", `{"text":"cut`), call("fail", ``), call("fail", `null`)),
			textReply("done"),
		}},
		{name: "one id in every round and twice in a reply", mode: agentloop.ModeFull, replies: []llmtest.Reply{
			toolReply(idCall("call_0", "echo", `{"text":"a"}`), idCall("call_0", "echo", `{"text":"b"}`)),
			toolReply(idCall("call_0", "echo", `{"text":"c"}`)),
			textReply("done"),
		}},
		{name: "empty, unicode and very long ids", mode: agentloop.ModeFull, replies: []llmtest.Reply{
			{Body: `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[` +
				`{"id":"","type":"function","function":{"name":"echo","arguments":"{\"text\":\"a\"}"}},` +
				`{"id":"呼び出し_☃","type":"function","function":{"name":"echo","arguments":"{\"text\":\"b\"}"}},` +
				`{"id":"` + long + `","type":"function","function":{"name":"echo","arguments":"{\"text\":\"c\"}"}},` +
				`{"type":"function","function":{"name":" Echo ","arguments":"\"{\\\"text\\\":\\\"d\\\"}\""}}]}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`},
			textReply("done"),
		}},
		{name: "odd call shapes", mode: agentloop.ModeFull, replies: []llmtest.Reply{
			{Body: `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[` +
				`{"id":123,"type":"function","function":{"name":"echo","arguments":"{\"text\":\"numeric id\"}"}},` +
				`{"id":"n1","type":"function","function":{"name":"echo","arguments":5}},` +
				`{"id":"n2","type":"function","function":{"name":"echo","arguments":[1]}},` +
				`{"id":"n3","type":"function","function":{"name":"echo"}},` +
				`{"id":"n4","type":"function","function":{"arguments":"{}"}},` +
				`{"id":"n5","type":"function","function":{"name":"","arguments":"{}"}},` +
				`{"id":"n6","type":"function","function":null},` +
				`{"id":"n7","type":"custom","custom":{"name":"echo","input":"hi"}}]}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`},
			textReply("done"),
		}},
		{name: "calls written into the content", mode: agentloop.ModeFull, replies: []llmtest.Reply{
			textReply(`[TOOL_CALLS][{"name": "echo", "arguments": {"text": "a"}}, {"name": "echo", "arguments": {"text": "b"}}]`),
			textReply(`<tool_call>{"name": "get_weather", "arguments": {"city": "Lima"}}</tool_call>`),
			textReply("done"),
		}},
		{name: "a schema retry", mode: agentloop.ModeDeferred, retries: 1, replies: []llmtest.Reply{
			toolReply(call("get_weather", `{"city":1}`)),
			toolReply(call("get_weather", `{"city":"Lima"}`)),
			textReply("done"),
		}},
		{name: "meta tools and call_tool", mode: agentloop.ModeSearch, replies: []llmtest.Reply{
			toolReply(call("search_tools", `{"query":"weather"}`), call("get_tool_details", `{"name":"get_weather"}`)),
			toolReply(call("call_tool", `{"name":"get_weather","arguments":{"city":"Lima"}}`),
				call("call_tool", `{"name":"no_such_tool","arguments":{}}`),
				call("call_tool", `{"name":"get_weather","arguments":{"city":7}}`),
				call("call_tool", `{"name":"echo","arguments":"{\"text\":\"twice encoded\"}"}`),
				call("call_tool", `{"name":"fail","arguments":{}}`)),
			textReply("done"),
		}},
		{name: "client tools, direct and through call_tool", mode: agentloop.ModeSearch, client: true, replies: []llmtest.Reply{
			toolReply(call("call_tool", `{"name":"ask_user","arguments":{"question":"city?"}}`),
				call("call_tool", `{"name":"echo","arguments":{"text":"server wins"}}`)),
			textReply("done"),
		}},
		{name: "client tools beside server tools", mode: agentloop.ModeFull, client: true, replies: []llmtest.Reply{
			toolReply(call("ask_user", `{"question":"city?"}`), call("ask_user", `{"question":"fail"}`),
				call("ask_user", `{"question":1}`), call("echo", `{"text":"server"}`)),
			textReply("done"),
		}},
		{name: "execute_code", mode: agentloop.ModeCode, client: true, replies: []llmtest.Reply{
			toolReply(codeCall(`const [a, b] = await Promise.all([tools.echo({text: "a"}), tools.get_weather({city: "Lima"})]);
const who = await tools.ask_user({question: "name?"});
try { await tools.fail({}); } catch (e) {}
try { await tools.get_weather({city: 3}); } catch (e) {}
return [a, b, who].join(" ")`),
				codeCall(`return 1 + 1`),
				codeCall(`return await tools.echo({text: "second script"})`)),
			toolReply(codeCall(`throw new Error("boom")`)),
			textReply("done"),
		}},
		{name: "context length exceeded after a round", mode: agentloop.ModeSearch, failing: true, replies: []llmtest.Reply{
			toolReply(call("call_tool", `{"name":"echo","arguments":{"text":"1"}}`), call("get_weather", `{"city":"Lima"}`)),
			{Status: 400, Content: "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."},
		}},
		{name: "the final answer refused", mode: agentloop.ModeCode, maxRounds: 1, failing: true, replies: []llmtest.Reply{
			toolReply(codeCall(`return await tools.echo({text: "x"})`)),
			rawReply(`{"role":"assistant","content":null}`, "content_filter"),
		}},
		{name: "a model that never stops calling", mode: agentloop.ModeSearch, maxRounds: 2, replies: []llmtest.Reply{
			toolReply(call("call_tool", `{"name":"echo","arguments":{"text":"1"}}`)),
			toolReply(call("call_tool", `{"name":"echo","arguments":{"text":"2"}}`)),
			toolReply(call("call_tool", `{"name":"echo","arguments":{"text":"3"}}`)),
			textReply("ran out of rounds"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			retries := tc.retries
			if retries == 0 {
				retries = -1
			}
			run := func(t *testing.T, history []llm.Message, mode agentloop.Mode, replies ...llmtest.Reply) *agentloop.Result {
				t.Helper()
				s := llmtest.NewServer(t, replies...)
				in := agentloop.Input{JobID: t.Name(), Task: "go", History: history, Tools: tools, Mode: mode, MaxRounds: tc.maxRounds}
				if tc.client {
					in.ClientTools = []clienttools.Decl{ask, shadow}
					in.ClientCaller = func(_ context.Context, name string, args json.RawMessage) (string, error) {
						if strings.Contains(string(args), "fail") {
							return "", errors.New("the submitter refused")
						}
						return "answered " + name, nil
					}
				}
				res, err := newLoop(t, s, agentloop.Config{SchemaRetries: retries}).Run(t.Context(), in)
				if (err != nil) != tc.failing {
					t.Fatalf("run: %v (want it to fail: %v)", err, tc.failing)
				}
				for _, r := range s.Requests() {
					// Offered once each: a client tool a server tool shadows is not sent.
					var names []string
					for _, tl := range r.Tools {
						if slices.Contains(names, tl.Name) {
							t.Errorf("request %d offers %s twice", r.N, tl.Name)
						}
						names = append(names, tl.Name)
					}
				}
				// Every request the model got was a chat history too.
				for _, r := range s.Requests() {
					if bad := checkChatHistory(r.Messages, false); len(bad) > 0 {
						t.Errorf("request %d: %s\n%s", r.N, strings.Join(bad, "\n"), mustJSON(t, r.Messages))
					}
				}
				for _, tr := range []struct {
					name string
					msgs []llm.Message
				}{{"raw", res.Messages}, {"reflected", reflect.Rewrite(res.Messages, res.Records)}} {
					if bad := checkChatHistory(tr.msgs, !tc.failing); len(bad) > 0 {
						t.Errorf("%s transcript: %s\n%s", tr.name, strings.Join(bad, "\n"), mustJSON(t, tr.msgs))
					}
				}
				if bad := checkRecords(res.Messages, res.Records); len(bad) > 0 {
					t.Errorf("records: %s\n%s", strings.Join(bad, "\n"), mustJSON(t, res.Records))
				}
				return res
			}
			res := run(t, nil, tc.mode, tc.replies...)
			for _, ig := range reflect.Ignore(res.Records) {
				t.Errorf("record not reflected: %+v", ig)
			}
			// The stored (reflected) transcript is history for a new job, in
			// any mode; a failed job's too.
			history := reflect.Rewrite(res.Messages, res.Records)
			if err := llm.CheckHistory(history); err != nil {
				t.Errorf("CheckHistory of the stored transcript: %v", err)
			}
			if tc.failing {
				return
			}
			t.Run("continued", func(t *testing.T) {
				run(t, history, tc.mode, tc.replies...)
			})
			for _, mode := range []agentloop.Mode{agentloop.ModeFull, agentloop.ModeSearch, agentloop.ModeCode} {
				if mode != tc.mode {
					t.Run("continued in "+string(mode), func(t *testing.T) {
						run(t, history, mode, textReply("continued"))
					})
				}
			}
		})
	}
}
