package agentloop_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/reflect"
)

func TestDeferredModeSendsNoFullSchema(t *testing.T) {
	t.Parallel()
	var ts testServer
	tools := newToolSet(t, &ts, false)
	s := llmtest.NewServer(t,
		toolReply(call("get_weather", `{"city":"Paris","units":"c"}`)),
		textReply("It is sunny in Paris."),
	)
	l := newLoop(t, s, agentloop.Config{})
	res, err := l.Run(t.Context(), agentloop.Input{Task: "Weather in Paris?", Mode: agentloop.ModeDeferred, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if res.Answer != "It is sunny in Paris." || res.StopReason != agentloop.StopFinalAnswer || res.Rounds != 1 || res.Mode != agentloop.ModeDeferred {
		t.Fatalf("result = %q %s rounds=%d mode=%s", res.Answer, res.StopReason, res.Rounds, res.Mode)
	}
	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	for _, r := range reqs {
		if len(r.Tools) != len(tools.Tools()) {
			t.Fatalf("request %d: %d tools, want %d", r.N, len(r.Tools), len(tools.Tools()))
		}
		for _, tool := range r.Tools {
			if string(tool.Parameters) != `{"type":"object"}` {
				t.Errorf("request %d: tool %s parameters = %s, want {\"type\":\"object\"}", r.N, tool.Name, tool.Parameters)
			}
			if strings.Contains(tool.Description, "\n") {
				t.Errorf("request %d: tool %s description is not one line: %q", r.N, tool.Name, tool.Description)
			}
		}
	}
	if w, _ := toolByName(reqs[0].Tools, "get_weather"); w.Description != "Get the current weather for a city." {
		t.Errorf("deferred description = %q", w.Description)
	}
	if !bytes.Equal(reqs[0].ToolsJSON, reqs[1].ToolsJSON) {
		t.Error("tools array changed between requests")
	}
	got := toolMessages(reqs[1].Messages)
	if len(got) != 1 || got[0].Content != "weather in Paris: 21c, sunny" {
		t.Fatalf("tool messages = %+v", got)
	}
	if ts.calls.Load() != 1 {
		t.Errorf("MCP server saw %d calls, want 1", ts.calls.Load())
	}
	// Usage: what was sent is much less than full mode.
	if res.Usage.ToolDefTokens <= 0 || res.Usage.ToolDefTokens >= res.Usage.FullModeToolDefTokens {
		t.Errorf("usage tool tokens sent %d, full %d", res.Usage.ToolDefTokens, res.Usage.FullModeToolDefTokens)
	}
	if res.Usage.PromptTokens == 0 || res.Usage.CompletionTokens == 0 {
		t.Errorf("provider usage not summed: %+v", res.Usage.Usage)
	}
}

func TestFullModeSendsSchemas(t *testing.T) {
	t.Parallel()
	var ts testServer
	tools := newToolSet(t, &ts, false)
	s := llmtest.NewServer(t, textReply("hi"))
	l := newLoop(t, s, agentloop.Config{})
	res, err := l.Run(t.Context(), agentloop.Input{Task: "hi", Mode: agentloop.ModeFull, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	w, ok := toolByName(s.Requests()[0].Tools, "get_weather")
	if !ok || compact(t, w.Parameters) != compact(t, []byte(weatherSchema)) {
		t.Fatalf("full mode get_weather parameters = %s", w.Parameters)
	}
	if res.Usage.ToolDefTokens != res.Usage.FullModeToolDefTokens {
		t.Errorf("full mode: sent %d tokens, full %d", res.Usage.ToolDefTokens, res.Usage.FullModeToolDefTokens)
	}
}

func TestEphemeralRetryLeavesNoTrace(t *testing.T) {
	t.Parallel()
	var ts testServer
	tools := newToolSet(t, &ts, false)
	bad := `{"repo":{"owner":"acme"},"title":"Crash","priority":"high"}`
	good := `{"repo":{"owner":"acme","name":"rocket"},"title":"Crash","priority":2}`
	s := llmtest.NewServer(t,
		toolReply(call("get_weather", `{"city":"Oslo"}`), call("create_issue", bad)),
		toolReply(call("get_weather", `{"city":"Oslo"}`), call("create_issue", good)),
		textReply("Done."),
	)
	ev := &events{}
	l := newLoop(t, s, agentloop.Config{})
	res, err := l.Run(t.Context(), agentloop.Input{Task: "File a crash issue", Mode: agentloop.ModeDeferred, Tools: tools, Sink: ev})
	if err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	// The retry is the same request plus a note, with create_issue's full
	// schema; the other tools stay, deferred.
	retry := reqs[1]
	if mustJSON(t, retry.Messages[:len(reqs[0].Messages)]) != mustJSON(t, reqs[0].Messages) || len(retry.Messages) != len(reqs[0].Messages)+1 {
		t.Fatalf("retry messages are not the original plus one note:\n%s\n%s", mustJSON(t, reqs[0].Messages), mustJSON(t, retry.Messages))
	}
	note := retry.Messages[len(retry.Messages)-1].Content
	for _, want := range []string{"create_issue", "/repo", "missing property 'name'", "/priority", "want integer", `"minimum":1`} {
		if !strings.Contains(note, want) {
			t.Errorf("retry note lacks %q:\n%s", want, note)
		}
	}
	if strings.Contains(note, "get_weather") {
		t.Errorf("retry note mentions the valid call:\n%s", note)
	}
	for _, tool := range retry.Tools {
		want := `{"type":"object"}`
		if tool.Name == "create_issue" {
			want = compact(t, []byte(issueSchema))
		}
		if compact(t, tool.Parameters) != want {
			t.Errorf("retry tool %s parameters = %s, want %s", tool.Name, tool.Parameters, want)
		}
	}
	if len(retry.Tools) != len(reqs[0].Tools) {
		t.Errorf("retry has %d tools, want all %d", len(retry.Tools), len(reqs[0].Tools))
	}
	// No trace: the next request holds the accepted reply only, and the
	// deferred array again.
	last := reqs[2]
	raw := string(last.Raw)
	if strings.Contains(raw, "high") || strings.Contains(raw, "not accepted") {
		t.Errorf("failed attempt leaked into history: %s", raw)
	}
	if !bytes.Equal(last.ToolsJSON, reqs[0].ToolsJSON) {
		t.Error("tools array after the retry differs from the deferred one")
	}
	wantLen := len(reqs[0].Messages) + 3 // assistant + 2 tool results
	if len(last.Messages) != wantLen || mustJSON(t, withoutNames(res.Messages[:wantLen])) != mustJSON(t, last.Messages) {
		t.Errorf("history = %s", mustJSON(t, last.Messages))
	}
	if ts.calls.Load() != 2 {
		t.Errorf("server calls = %d, want 2 (invalid call never ran)", ts.calls.Load())
	}
	if n := len(ev.of(agentloop.EventToolValidationFailed)); n != 1 {
		t.Errorf("%d validation_failed events, want 1", n)
	}
	if r := ev.of(agentloop.EventToolSchemaRetry); len(r) != 1 || mustJSON(t, r[0].Data["tools"]) != `["create_issue"]` {
		t.Errorf("schema_retry events = %+v", r)
	}
}

func TestValidationErrorsReachModel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, tool, args string
		want             []string
	}{
		{"nested required", "create_issue", `{"repo":{"owner":"a"},"title":"x"}`, []string{"at '/repo': missing property 'name'"}},
		{"nested additional", "create_issue", `{"repo":{"owner":"a","name":"b","x":1},"title":"x"}`, []string{"at '/repo'", "additional"}},
		{"enum in array", "create_issue", `{"repo":{"owner":"a","name":"b"},"title":"x","labels":["bug","wontfix"]}`, []string{"at '/labels/1'", "bug", "feature"}},
		{"type", "create_issue", `{"repo":{"owner":"a","name":"b"},"title":"x","priority":"2"}`, []string{"at '/priority': got string, want integer"}},
		{"range", "create_issue", `{"repo":{"owner":"a","name":"b"},"title":"x","priority":9}`, []string{"at '/priority'", "maximum"}},
		{"enum", "get_weather", `{"city":"Rome","units":"kelvin"}`, []string{"at '/units'", `"c"`}},
		{"required", "get_weather", `{"units":"c"}`, []string{"missing property 'city'"}},
		{"top-level additional", "get_weather", `{"city":"Rome","country":"IT"}`, []string{"additional", "country"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, toolReply(call(tc.tool, tc.args)), textReply("ok"))
			// Retries disabled: the errors go straight back as the result.
			l := newLoop(t, s, agentloop.Config{SchemaRetries: -1})
			if _, err := l.Run(t.Context(), agentloop.Input{Task: "go", Mode: agentloop.ModeDeferred, Tools: tools}); err != nil {
				t.Fatal(err)
			}
			msgs := toolMessages(s.Requests()[1].Messages)
			if len(msgs) != 1 {
				t.Fatalf("tool messages = %+v", msgs)
			}
			for _, w := range tc.want {
				if !strings.Contains(msgs[0].Content, w) {
					t.Errorf("tool result lacks %q:\n%s", w, msgs[0].Content)
				}
			}
			if !strings.HasPrefix(msgs[0].Content, "Error: invalid arguments for tool "+tc.tool) {
				t.Errorf("tool result = %q", msgs[0].Content)
			}
			if ts.calls.Load() != 0 {
				t.Errorf("invalid call reached the server")
			}
		})
	}
}

func TestRetryExhaustedSendsErrors(t *testing.T) {
	t.Parallel()
	var ts testServer
	tools := newToolSet(t, &ts, false)
	bad := call("get_weather", `{"city":7}`)
	s := llmtest.NewServer(t, toolReply(bad), toolReply(bad), toolReply(bad), textReply("gave up"))
	ev := &events{}
	l := newLoop(t, s, agentloop.Config{SchemaRetries: 2})
	res, err := l.Run(t.Context(), agentloop.Input{Task: "go", Mode: agentloop.ModeFull, Tools: tools, Sink: ev})
	if err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4 (1 + 2 retries + follow-up)", len(reqs))
	}
	// Full mode: the retries keep the tools array; only the note is added.
	for _, r := range reqs[1:3] {
		if !bytes.Equal(r.ToolsJSON, reqs[0].ToolsJSON) {
			t.Errorf("request %d changed the full-mode tools array", r.N)
		}
	}
	msgs := toolMessages(reqs[3].Messages)
	if len(msgs) != 1 || !strings.Contains(msgs[0].Content, "at '/city': got number, want string") {
		t.Fatalf("tool messages = %+v", msgs)
	}
	if len(ev.of(agentloop.EventToolValidationFailed)) != 3 || len(ev.of(agentloop.EventToolSchemaRetry)) != 2 {
		t.Errorf("events: %d validation_failed, %d schema_retry", len(ev.of(agentloop.EventToolValidationFailed)), len(ev.of(agentloop.EventToolSchemaRetry)))
	}
	if res.Answer != "gave up" {
		t.Errorf("answer = %q", res.Answer)
	}
}

func TestSearchModeToolsByteIdentical(t *testing.T) {
	t.Parallel()
	var ts testServer
	tools := newToolSet(t, &ts, true)
	s := llmtest.NewServer(t,
		toolReply(call("search_tools", `{"query":"weather forecast"}`)),
		toolReply(call("get_tool_details", `{"name":"get_weather"}`)),
		// An invalid call through call_tool: retried with the schema in
		// the note, the array untouched.
		toolReply(call("call_tool", `{"name":"get_weather","arguments":{"city":"Oslo","units":"K"}}`)),
		toolReply(call("call_tool", `{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}`)),
		toolReply(call("call_tool", `{"name":"mcp_read_resource","arguments":{"uri":"notes"}}`)),
		toolReply(call("call_tool", `{"name":"get_wether","arguments":{}}`)),
		textReply("Oslo: sunny."),
	)
	ev := &events{}
	l := newLoop(t, s, agentloop.Config{})
	res, err := l.Run(t.Context(), agentloop.Input{Task: "Weather in Oslo?", Mode: agentloop.ModeSearch, Tools: tools, Sink: ev})
	if err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	if len(reqs) != 7 {
		t.Fatalf("%d requests, want 7", len(reqs))
	}
	for _, r := range reqs[1:] {
		if !bytes.Equal(r.ToolsJSON, reqs[0].ToolsJSON) {
			t.Fatalf("request %d tools differ:\n%s\n%s", r.N, r.ToolsJSON, reqs[0].ToolsJSON)
		}
	}
	var names []string
	for _, tool := range reqs[0].Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "search_tools,get_tool_details,call_tool" {
		t.Fatalf("search mode tools = %v", names)
	}
	results := toolMessages(res.Messages)
	if len(results) != 5 {
		t.Fatalf("%d tool results, want 5: %s", len(results), mustJSON(t, results))
	}
	if !strings.HasPrefix(results[0].Content, `[{"name":"get_weather"`) {
		t.Errorf("search_tools result = %s", results[0].Content)
	}
	if !strings.Contains(results[1].Content, `"input_schema":{`) || !strings.Contains(results[1].Content, `"enum":["c","f"]`) {
		t.Errorf("get_tool_details result = %s", results[1].Content)
	}
	if results[2].Content != "weather in Oslo: 21c, sunny" {
		t.Errorf("call_tool result = %s", results[2].Content)
	}
	if results[3].Content != "buy milk" {
		t.Errorf("resource through call_tool = %s", results[3].Content)
	}
	if !strings.Contains(results[4].Content, `unknown tool "get_wether"; closest names: get_weather`) {
		t.Errorf("unknown tool result = %s", results[4].Content)
	}
	note := reqs[3].Messages[len(reqs[3].Messages)-1]
	if !strings.Contains(note.Content, "at '/units'") || !strings.Contains(note.Content, "Full input schema of get_weather") {
		t.Errorf("retry note = %s", note.Content)
	}
	if strings.Contains(string(reqs[4].Raw), `"K"`) {
		t.Error("failed attempt leaked into history")
	}
	// Records: the real calls behind call_tool, in order, for reflect.
	if len(res.Records) != 2 {
		t.Fatalf("records = %+v", res.Records)
	}
	r0 := res.Records[0]
	if r0.Kind != reflect.KindCallTool || r0.Name != "get_weather" || string(r0.Input) != `{"city":"Oslo"}` ||
		r0.Output == nil || *r0.Output != "weather in Oslo: 21c, sunny" || r0.CallID != results[2].ToolCallID {
		t.Errorf("record = %+v", r0)
	}
	if res.Records[1].Name != "mcp_read_resource" {
		t.Errorf("record 1 = %+v", res.Records[1])
	}
}

func TestAutoModeChoosesByTokens(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		th   agentloop.AutoThresholds
		want agentloop.Mode
	}{
		{agentloop.AutoThresholds{DeferredAbove: 100000, SearchAbove: 200000}, agentloop.ModeFull},
		{agentloop.AutoThresholds{DeferredAbove: 10, SearchAbove: 100000}, agentloop.ModeDeferred},
		{agentloop.AutoThresholds{DeferredAbove: 5, SearchAbove: 10}, agentloop.ModeSearch},
	} {
		t.Run(string(tc.want), func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, textReply("ok"))
			l := newLoop(t, s, agentloop.Config{AutoThresholds: tc.th})
			res, err := l.Run(t.Context(), agentloop.Input{Task: "go", Tools: tools})
			if err != nil {
				t.Fatal(err)
			}
			if res.Mode != tc.want {
				t.Fatalf("mode = %s, want %s", res.Mode, tc.want)
			}
			want, err := agentloop.BuildTools(tc.want, tools.Tools())
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Requests()[0].Tools; mustJSON(t, normalise(t, got)) != mustJSON(t, normalise(t, want)) {
				t.Errorf("sent tools differ from BuildTools(%s):\n%s\n%s", tc.want, mustJSON(t, got), mustJSON(t, want))
			}
		})
	}
}

// normalise canonicalises parameters (sorted keys) for comparison.
func normalise(t *testing.T, tools []llm.Tool) []llm.Tool {
	out := make([]llm.Tool, len(tools))
	for i, tool := range tools {
		tool.Parameters = []byte(compact(t, tool.Parameters))
		out[i] = tool
	}
	return out
}

// Usage adds up what each request sent: the llm.request events' tool
// tokens (a schema retry sends more, the final request none), and full
// mode's cost for every request that carried tools.
func TestUsageAcrossRetryAndFinalRequest(t *testing.T) {
	t.Parallel()
	var ts testServer
	tools := newToolSet(t, &ts, false)
	s := llmtest.NewServer(t,
		toolReply(call("get_weather", `{"city":1}`)),
		toolReply(call("get_weather", `{"city":"Oslo"}`)),
		textReply("Oslo is sunny."),
	)
	ev := &events{}
	l := newLoop(t, s, agentloop.Config{})
	res, err := l.Run(t.Context(), agentloop.Input{Task: "go", Tools: tools, Mode: agentloop.ModeDeferred, MaxRounds: 1, Sink: ev})
	if err != nil {
		t.Fatal(err)
	}
	full, err := agentloop.BuildTools(agentloop.ModeFull, tools.Tools())
	if err != nil {
		t.Fatal(err)
	}
	fullToks, err := agentloop.ToolTokens(full)
	if err != nil {
		t.Fatal(err)
	}
	var sent, withTools int64
	for i, e := range ev.of(agentloop.EventLLMRequest) {
		n := int64(e.Data["tool_def_tokens"].(int))
		r := s.Requests()[i]
		want, err := agentloop.ToolTokens(r.Tools)
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(want) {
			t.Errorf("request %d: event says %d tool tokens, the request carried %d", r.N, n, want)
		}
		sent += n
		if r.ToolsJSON != nil {
			withTools++
		}
	}
	if len(s.Requests()) != 3 || withTools != 2 {
		t.Fatalf("%d requests, %d with tools", len(s.Requests()), withTools)
	}
	if res.Usage.ToolDefTokens != sent || res.Usage.FullModeToolDefTokens != withTools*int64(fullToks) {
		t.Errorf("usage %+v; want sent %d, full %d", res.Usage, sent, withTools*int64(fullToks))
	}
	var prompt int64
	for _, e := range ev.of(agentloop.EventLLMResponse) {
		prompt += e.Data["prompt_tokens"].(int64)
	}
	if res.Usage.PromptTokens != prompt {
		t.Errorf("prompt tokens %d, responses sum to %d", res.Usage.PromptTokens, prompt)
	}
}
