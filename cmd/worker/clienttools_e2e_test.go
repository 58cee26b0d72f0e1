package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
	"github.com/jetagent/jetagent/internal/reflect"
	"github.com/jetagent/jetagent/schemas"
)

// buildSubmit builds the submit command once per test run: the client
// side of these tests is the real binary, as a user runs it.
func buildSubmit() (string, error) { return buildBinary("../submit", "submit") }

// needSubmit builds the submit binary before the test's ctx starts. Built
// on first use inside clientHarness.submit, the build (13 s under load)
// came out of the 30 s the ctx gives the job, and submit was killed with
// no output (exit -1).
func needSubmit(t *testing.T) {
	t.Helper()
	if _, err := buildSubmit(); err != nil {
		t.Fatal(err)
	}
}

// npmBin is an npm reference MCP server installed by `npm ci --prefix tools/npm`.
func npmBin(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "tools", "npm", "node_modules", ".bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s not installed (run: npm ci --prefix tools/npm): %v", name, err)
	}
	return p
}

// clientHarness is a worker (the worker command's serve, in process) on a
// NATS server the test owns, so that a submit process can reach it too.
type clientHarness struct {
	natsURL string
	nc      *nats.Conn // the test's own connection (spies, client)
	client  *jobs.Client
	model   *llmtest.Server
	v       *jobs.Validator
}

// startClientWorker runs the worker with the example MCP server as "demo",
// the scripted model answering with model, and env on top of the defaults.
func startClientWorker(t *testing.T, model func(llmtest.RecordedRequest) llmtest.Reply, env map[string]string) *clientHarness {
	t.Helper()
	bin, err := buildMCPServer()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ns, err := jobs.StartEmbedded(jobs.EmbeddedConfig{DataDir: filepath.Join(dir, "nats"), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() }) // runs last
	mcpCfg := filepath.Join(dir, "mcp.json")
	if err := os.WriteFile(mcpCfg, []byte(`{"mcpServers": {"demo": {"command": "`+bin+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &clientHarness{natsURL: ns.ClientURL(), model: llmtest.NewServer(t)}
	h.model.Handle(model)
	if h.v, err = jobs.NewValidator(0); err != nil {
		t.Fatal(err)
	}

	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", h.model.URL())
	t.Setenv("NATS_URL", h.natsURL)
	t.Setenv("JETAGENT_MCP_CONFIG", mcpCfg)
	t.Setenv("JETAGENT_WORKER_ID", "e2e")
	for k, v := range env {
		t.Setenv(k, v)
	}
	s, err := loadSettings()
	if err != nil {
		t.Fatal(err)
	}
	startServe(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if h.nc, err = nats.Connect(h.natsURL); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.nc.Close)
	if h.client, err = jobs.NewClient(ctx, h.nc, jobs.ClientConfig{}); err != nil {
		t.Fatal(err)
	}
	return h
}

// spy collects the core NATS messages on subject (from now on).
func (h *clientHarness) spy(t *testing.T, subject string) func() []*nats.Msg {
	t.Helper()
	var mu sync.Mutex
	var msgs []*nats.Msg
	sub, err := h.nc.Subscribe(subject, func(m *nats.Msg) {
		mu.Lock()
		msgs = append(msgs, m)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := h.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return func() []*nats.Msg {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(msgs)
	}
}

// events returns the stored events of a job.
func (h *clientHarness) events(t *testing.T, ctx context.Context, id string) []jobs.Event {
	t.Helper()
	js, err := jetstream.New(h.nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, "AGENT_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"agent.events." + id + ".>"}})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.FetchNoWait(1000)
	if err != nil {
		t.Fatal(err)
	}
	var evs []jobs.Event
	for m := range batch.Messages() {
		var ev jobs.Event
		if err := json.Unmarshal(m.Data(), &ev); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// submit runs the submit binary against the harness's NATS.
func (h *clientHarness) submit(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	bin, err := buildSubmit()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "NATS_URL="+h.natsURL)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		return ee.ExitCode(), out.String(), errb.String()
	}
	if err != nil {
		t.Fatalf("submit %v: %v\n%s", args, err, errb.String())
	}
	return 0, out.String(), errb.String()
}

// transcript fetches a stored transcript with `submit transcript ID --json
// [--raw]` and checks it against the schema.
func (h *clientHarness) transcript(t *testing.T, ctx context.Context, id string, raw bool) (jobs.Transcript, []byte) {
	t.Helper()
	args := []string{"transcript", id, "--json"}
	if raw {
		args = append(args, "--raw")
	}
	code, out, errOut := h.submit(t, ctx, args...)
	if code != 0 {
		t.Fatalf("submit %v: exit %d: %s", args, code, errOut)
	}
	if err := h.v.Validate(schemas.Transcript, []byte(out)); err != nil {
		t.Errorf("transcript raw=%v: %v", raw, err)
	}
	var tr jobs.Transcript
	if err := json.Unmarshal([]byte(out), &tr); err != nil {
		t.Fatal(err)
	}
	if tr.Reflected == raw {
		t.Errorf("transcript raw=%v says reflected=%v", raw, tr.Reflected)
	}
	return tr, []byte(out)
}

// afterLastUser is what follows the last user message (this job's rounds).
func afterLastUser(msgs []llm.Message) []llm.Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			return msgs[i+1:]
		}
	}
	return msgs
}

func lastUser(msgs []llm.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == llm.RoleUser {
			return msgs[i].Content
		}
	}
	return ""
}

// threeToolsModel plays a model in search mode that looks for tools, then
// calls a server tool directly (add), another through call_tool
// (get_weather) and a client tool (read_text_file, answered by the
// submitter's filesystem server), then answers with what it got.
func threeToolsModel(path string) func(llmtest.RecordedRequest) llmtest.Reply {
	return func(req llmtest.RecordedRequest) llmtest.Reply {
		var results []string
		for _, m := range afterLastUser(req.Messages) {
			if m.Role == llm.RoleTool {
				results = append(results, m.Content)
			}
		}
		if !strings.HasPrefix(lastUser(req.Messages), "three tools") {
			return llmtest.Reply{Content: "continued: " + lastUser(req.Messages)}
		}
		switch len(results) {
		case 0:
			return llmtest.Reply{ToolCalls: []llm.ToolCall{
				{ID: "call_search", Function: llm.FunctionCall{Name: "search_tools", Arguments: `{"query":"read text file"}`}},
			}}
		case 1:
			pathJSON, _ := json.Marshal(path)
			return llmtest.Reply{ToolCalls: []llm.ToolCall{
				{ID: "call_add", Function: llm.FunctionCall{Name: "add", Arguments: `{"a":2,"b":3}`}},
				{ID: "call_weather", Function: llm.FunctionCall{Name: "call_tool", Arguments: `{"name":"get_weather","arguments":{"city":"Lisbon"}}`}},
				{ID: "call_read", Function: llm.FunctionCall{Name: "read_text_file", Arguments: `{"path":` + string(pathJSON) + `}`}},
			}}
		}
		return llmtest.Reply{Content: "done: " + strings.Join(results[1:], " | ")}
	}
}

// toolCalls lists the calls of a transcript as "name args", in order, and
// maps each call id to the content of the tool message answering it.
func toolCalls(msgs []llm.Message) (calls []llm.ToolCall, results map[string]llm.Message) {
	results = map[string]llm.Message{}
	for _, m := range msgs {
		calls = append(calls, m.ToolCalls...)
		if m.Role == llm.RoleTool {
			results[m.ToolCallID] = m
		}
	}
	return calls, results
}

// checkConsistent checks the chat-completions invariants a provider
// enforces: every tool message answers a call of the closest preceding
// assistant message, each call is answered exactly once before the next
// assistant or user message, and call ids are unique.
func checkConsistent(t *testing.T, what string, msgs []llm.Message) {
	t.Helper()
	seen := map[string]bool{}
	var open map[string]bool // calls of the last assistant message not yet answered
	closeOpen := func(i int) {
		for id := range open {
			t.Errorf("%s: message %d: call %s was never answered", what, i, id)
		}
		open = nil
	}
	for i, m := range msgs {
		switch m.Role {
		case llm.RoleTool:
			if !open[m.ToolCallID] {
				t.Errorf("%s: message %d: tool message answers %q, not an open call of the preceding assistant message", what, i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		case llm.RoleAssistant:
			closeOpen(i)
			open = map[string]bool{}
			for _, c := range m.ToolCalls {
				if c.ID == "" || seen[c.ID] {
					t.Errorf("%s: message %d: call id %q empty or repeated", what, i, c.ID)
				}
				seen[c.ID] = true
				open[c.ID] = true
				if !json.Valid([]byte(c.Function.Arguments)) {
					t.Errorf("%s: message %d: call %s: arguments are not JSON: %s", what, i, c.ID, c.Function.Arguments)
				}
			}
		default:
			closeOpen(i)
		}
	}
	closeOpen(len(msgs))
}

// TestClientToolsEndToEnd is the "done when": one job uses a tool
// of the worker's MCP server (add), a tool reached through call_tool
// (get_weather) and a client tool (read_text_file) answered by `submit
// --local-mcp` running @modelcontextprotocol/server-filesystem on the
// submitter's side. The stored reflected transcript names the three real
// tools with their real inputs and outputs; the raw one is what the model
// saw. The submitter's local config also runs the example server, whose
// tools clash with the worker's: the worker's win (tool.clash events) and
// the submitter is never asked for them.
func TestClientToolsEndToEnd(t *testing.T) {
	fsBin := npmBin(t, "mcp-server-filesystem")
	demoBin, err := buildMCPServer()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	const content = "The launch code is 4-8-15-16-23-42.\nKeep it secret.\n"
	path := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(t.TempDir(), "local-mcp.json")
	cfg := fmt.Sprintf(`{"mcpServers": {"fs": {"command": %q, "args": [%q]}, "demo": {"command": %q}}}`, fsBin, dir, demoBin)
	if err := os.WriteFile(local, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	needSubmit(t)
	h := startClientWorker(t, threeToolsModel(path), nil)
	ctx := natstest.Context(t)
	const id = "e2e-three-tools"
	clientReqs := h.spy(t, "agent.client."+id)
	published := h.spy(t, "agent.jobs.>")

	code, stdout, stderr := h.submit(t, ctx, "--id", id, "--mode", "search", "--servers", "demo", "--local-mcp", local,
		"three tools: add 2 and 3, the weather in Lisbon, and read notes.txt")
	if code != 0 {
		t.Fatalf("submit: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "done: 5 | ") || !strings.Contains(stdout, "launch code is 4-8-15-16-23-42") {
		t.Errorf("answer %q", stdout)
	}

	// What the submitter declared and who was asked.
	var job jobs.Job
	if msgs := published(); len(msgs) != 1 || json.Unmarshal(msgs[0].Data, &job) != nil {
		t.Fatalf("published %d jobs", len(msgs))
	}
	declared := map[string]bool{}
	for _, ct := range job.ClientTools {
		declared[ct.Name] = true
	}
	if !declared["read_text_file"] || !declared["add"] || len(job.ClientSecret) < 32 {
		t.Errorf("declared client tools %v (secret %d bytes)", declared, len(job.ClientSecret))
	}
	reqs := clientReqs()
	if len(reqs) != 1 {
		t.Fatalf("%d client tool requests, want 1 (read_text_file only)", len(reqs))
	}
	if err := h.v.Validate("client_request.schema.json", reqs[0].Data); err != nil {
		t.Errorf("client request: %v", err)
	}
	var req struct{ Tool, Arguments string }
	_ = json.Unmarshal(reqs[0].Data, &req)
	if req.Tool != "read_text_file" || !strings.Contains(req.Arguments, "notes.txt") {
		t.Errorf("client request %s", reqs[0].Data)
	}
	if bytes.Contains(reqs[0].Data, []byte(job.ClientSecret)) {
		t.Error("the client request carries the secret")
	}

	// Clashing client tools are reported; the server's are used.
	clashes := map[string]string{}
	for _, ev := range h.events(t, ctx, id) {
		if ev.Type == "tool.clash" {
			var d struct{ Name, Server, Winner string }
			_ = json.Unmarshal(ev.Data, &d)
			clashes[d.Name] = d.Server + "/" + d.Winner
		}
	}
	for _, name := range []string{"add", "get_weather", "search_notes", "create_note", "slow"} {
		if clashes[name] != "demo/server" {
			t.Errorf("tool.clash for %s: %q (all: %v)", name, clashes[name], clashes)
		}
	}
	if _, ok := clashes["read_text_file"]; ok {
		t.Error("read_text_file reported as a clash")
	}

	raw, _ := h.transcript(t, ctx, id, true)
	refl, reflJSON := h.transcript(t, ctx, id, false)
	if raw.Mode != "search" || refl.Mode != "search" {
		t.Errorf("modes %s %s", raw.Mode, refl.Mode)
	}
	checkConsistent(t, "raw", raw.Messages)
	checkConsistent(t, "reflected", refl.Messages)

	// The raw transcript is exactly what the model saw: the last request
	// plus the final answer.
	modelReqs := h.model.Requests()
	last := modelReqs[len(modelReqs)-1].Messages
	if len(raw.Messages) != len(last)+1 {
		t.Fatalf("raw transcript has %d messages, the last request %d", len(raw.Messages), len(last))
	}
	for i, m := range last {
		r := raw.Messages[i]
		if m.Role != r.Role || m.Content != r.Content || m.ToolCallID != r.ToolCallID || !sameCalls(m.ToolCalls, r.ToolCalls) {
			t.Errorf("message %d: model saw %+v, raw transcript has %+v", i, m, r)
		}
	}
	rawCalls, rawResults := toolCalls(raw.Messages)
	if got := callNames(rawCalls); got != "search_tools add call_tool read_text_file" {
		t.Errorf("raw calls %s", got)
	}
	if s := rawResults["call_search"].Content; !strings.Contains(s, "read_text_file") {
		t.Errorf("search_tools did not find the client tool: %s", s)
	}
	weather := rawResults["call_weather"].Content
	if !strings.Contains(weather, "Lisbon") {
		t.Errorf("call_tool result %q", weather)
	}

	// The reflected transcript shows the real calls.
	if bytes.Contains(reflJSON, []byte(`"name":"call_tool"`)) {
		t.Errorf("reflected transcript still shows call_tool")
	}
	calls, results := toolCalls(refl.Messages)
	if got := callNames(calls); got != "search_tools add get_weather read_text_file" {
		t.Errorf("reflected calls %s", got)
	}
	pathJSON, _ := json.Marshal(path)
	want := []struct{ id, name, args, output string }{
		{"call_add", "add", `{"a":2,"b":3}`, "5"},
		{"call_weather", "get_weather", `{"city":"Lisbon"}`, weather},
		{"call_read", "read_text_file", `{"path":` + string(pathJSON) + `}`, content},
	}
	for i, w := range want {
		c := calls[i+1]
		if c.ID != w.id || c.Function.Name != w.name || c.Function.Arguments != w.args {
			t.Errorf("reflected call %d: %+v, want %s %s(%s)", i+1, c, w.id, w.name, w.args)
		}
		if r := results[c.ID]; strings.TrimRight(r.Content, "\n") != strings.TrimRight(w.output, "\n") || r.Name != w.name {
			t.Errorf("result of %s: %q (name %q), want %q", w.name, r.Content, r.Name, w.output)
		}
	}
	// The records behind the rewrite are stored with it.
	kinds := map[string]string{}
	for _, r := range refl.Records {
		kinds[r.Name] = r.Kind
	}
	if kinds["get_weather"] != reflect.KindCallTool || kinds["read_text_file"] != reflect.KindClientTool || len(kinds) != 2 {
		t.Errorf("records %+v", refl.Records)
	}
	// Reflecting again changes nothing.
	if again := reflect.Rewrite(refl.Messages, refl.Records); !slices.EqualFunc(again, refl.Messages, sameMessage) {
		t.Error("Rewrite of the reflected transcript changed it")
	}
}

func callNames(calls []llm.ToolCall) string {
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = c.Function.Name
	}
	return strings.Join(names, " ")
}

func sameCalls(a, b []llm.ToolCall) bool {
	return slices.EqualFunc(a, b, func(x, y llm.ToolCall) bool {
		return x.ID == y.ID && x.Function.Name == y.Function.Name && x.Function.Arguments == y.Function.Arguments
	})
}

func sameMessage(a, b llm.Message) bool {
	return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID && a.Name == b.Name && sameCalls(a.ToolCalls, b.ToolCalls)
}
