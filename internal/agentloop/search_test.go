package agentloop_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// search_tools answers on the pool's shared index with signatures, a note
// when nothing matched well, a server filter, and the job's client tools
// ranked with the MCP tools; call_tool runs a tool whose details were
// never fetched.
func TestSearchToolsAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		search string // search_tools arguments
		want   []string
		not    []string
	}{
		{"signature", `{"query":"weather forecast for a city"}`,
			[]string{`[{"name":"get_weather","server":"test","description":"Get the current weather for a city.","call":"get_weather(city: string, units?: \"c\"|\"f\")"}`},
			[]string{"Note:"}},
		{"nested and array parameters", `{"query":"create an issue in a repository","limit":1}`,
			[]string{`"call":"create_issue(repo: object, title: string, labels?: (\"bug\"|\"feature\"|\"docs\")[], priority?: integer)"`}, nil},
		{"no word matches: closest names and a note", `{"query":"qqqxyz"}`,
			[]string{"Note: no tool matches the words", `[{"name":`}, nil},
		{"typo in a name word", `{"query":"wether"}`, []string{`[{"name":"get_weather"`}, []string{"Note:"}},
		{"server filter", `{"query":"echo text","server":"test"}`, []string{`"name":"echo"`}, nil},
		{"unknown server", `{"query":"echo","server":"nope"}`, []string{`Note: no server of this job is named "nope"; its servers: "test".`}, []string{`"name"`}},
		// The note quotes the query's head: a whole 100 KB query pushed the
		// closest names past the output cut.
		{"huge query", `{"query":"` + strings.Repeat("x", 100_000) + `"}`,
			[]string{"Note: no tool matches the words", `... (100000 bytes)`, `[{"name":`}, []string{strings.Repeat("x", 1000)}},
		{"huge unknown server", `{"query":"echo","server":"` + strings.Repeat("n", 100_000) + `"}`,
			[]string{`Note: no server of this job is named "nnn`, `... (100000 bytes)`}, []string{strings.Repeat("n", 1000)}},
		{"client tool ranked with MCP tools", `{"query":"look up the status of an order","limit":3}`,
			[]string{`"name":"lookup_order"`}, nil},
		// A word no tool has is named: the hits match the rest, and the
		// model should not take them for it.
		{"a word no tool has", `{"query":"weather on mars by telescope"}`,
			[]string{`Note: no tool of this job mentions "mars", "telescope" (nor a synonym); these match the other words.`, `[{"name":"get_weather"`}, nil},
		{"a word only a client tool has", `{"query":"order status by telescope"}`,
			[]string{`Note: no tool of this job mentions "telescope" (nor a synonym)`, `"name":"lookup_order"`}, []string{`"order"`}},
	}
	var ts testServer
	tools := newToolSet(t, &ts, false)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := firstToolAnswer(t, agentloop.Input{
				Task: "x", Mode: agentloop.ModeSearch, Tools: tools,
				ClientTools: []clienttools.Decl{{Name: "lookup_order", Description: "Look up an order's status by its number.",
					InputSchema: json.RawMessage(`{"type":"object","properties":{"number":{"type":"string"}},"required":["number"]}`)}},
				ClientCaller: func(context.Context, string, json.RawMessage) (string, error) { return "shipped", nil },
			}, "search_tools", tc.search)
			checkContains(t, out, tc.want, tc.not)
		})
	}
}

// firstToolAnswer runs a job whose model calls tool with args once, then
// answers, and returns the first tool message.
func firstToolAnswer(t *testing.T, in agentloop.Input, tool, args string) string {
	t.Helper()
	s := llmtest.NewServer(t, toolReply(call(tool, args)), textReply("done"))
	res, err := newLoop(t, s, agentloop.Config{}).Run(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	return toolMessages(res.Messages)[0].Content
}

// checkContains fails unless out has every want and none of not.
func checkContains(t *testing.T, out string, want, not []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("answer lacks %s:\n%s", w, out)
		}
	}
	for _, w := range not {
		if strings.Contains(out, w) {
			t.Errorf("answer has %s:\n%s", w, out)
		}
	}
}

// Search mode needs two model requests per tool: search_tools answers with
// the signature, and call_tool runs the tool without get_tool_details.
func TestSearchModeTwoRequestsPerTool(t *testing.T) {
	t.Parallel()
	var ts testServer
	tools := newToolSet(t, &ts, false)
	s := llmtest.NewServer(t,
		toolReply(call("search_tools", `{"query":"weather in a city"}`)),
		toolReply(call("call_tool", `{"name":"get_weather","arguments":{"city":"Oslo"}}`)),
		toolReply(call("search_tools", `{"query":"echo text back"}`)),
		toolReply(call("call_tool", `{"name":"echo","arguments":{"text":"hi","repeat":2}}`)),
		textReply("Oslo: sunny; hihi."),
	)
	l := newLoop(t, s, agentloop.Config{})
	res, err := l.Run(t.Context(), agentloop.Input{Task: "Weather in Oslo, then echo hi twice", Mode: agentloop.ModeSearch, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.Requests()); n != 5 {
		t.Errorf("%d requests for two tools, want 5 (2 per tool + the answer)", n)
	}
	got := toolMessages(res.Messages)
	if got[1].Content != "weather in Oslo: 21c, sunny" || got[3].Content != "hihi" {
		t.Errorf("results: %s", mustJSON(t, got))
	}
	if ts.calls.Load() != 2 {
		t.Errorf("server saw %d calls", ts.calls.Load())
	}
}

// catalogServer is a real mcp-go server offering the first n tools of a
// shared catalog, each answering "ok".
func catalogServer(t *testing.T, name string, n int) *server.MCPServer {
	t.Helper()
	_, tools, err := toolcache.LoadCatalog(filepath.Join("..", "..", "..", "shared", "catalogs", name+".json"))
	if err != nil {
		t.Skipf("catalog not available: %v", err)
	}
	s := server.NewMCPServer("catalog", "1.0.0", server.WithToolCapabilities(true))
	seen := map[string]bool{}
	for _, tl := range tools {
		if len(seen) == n {
			break
		}
		if seen[tl.Original] {
			continue
		}
		seen[tl.Original] = true
		schema := tl.InputSchema
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		mt := mcp.NewToolWithRawSchema(tl.Original, tl.Description, schema)
		s.AddTool(mt, func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("ok"), nil
		})
	}
	return s
}

// TestRequestsPerMode measures, for a task that uses three tools of a
// 500-tool catalog, the model requests and the prompt tokens (o200k_base
// over each request body as sent) per job in each mode; the figures are
// in docs/BENCHMARKS.md (go test -run RequestsPerMode -v).
func TestRequestsPerMode(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p, err := toolcache.NewPool(ctx, toolcache.Config{},
		toolcache.WithInProcessServer("catalog", catalogServer(t, "livemcptool-70servers", 500), toolcache.ServerConfig{}),
		toolcache.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	const task = "Get the Wikipedia article on Oslo, pick a random integer between 1 and 10, and create a Word document named oslo.docx."
	direct := []llmtest.Reply{
		toolReply(call("get_article", `{"title":"Oslo"}`), call("random_int", `{"low":1,"high":10}`), call("create_document", `{"filename":"oslo.docx"}`)),
		textReply("done"),
	}
	var searchOld, searchNew []llmtest.Reply
	for _, step := range []struct{ query, name, args string }{
		{"Wikipedia article", "get_article", `{"title":"Oslo"}`},
		{"random integer between two numbers", "random_int", `{"low":1,"high":10}`},
		{"create a Word document", "create_document", `{"filename":"oslo.docx"}`},
	} {
		find := toolReply(call("search_tools", `{"query":"`+step.query+`"}`))
		run := toolReply(call("call_tool", `{"name":"`+step.name+`","arguments":`+step.args+`}`))
		searchOld = append(searchOld, find, toolReply(call("get_tool_details", `{"name":"`+step.name+`"}`)), run)
		searchNew = append(searchNew, find, run)
	}
	searchOld = append(searchOld, textReply("done"))
	searchNew = append(searchNew, textReply("done"))
	tests := []struct {
		name   string
		mode   agentloop.Mode
		script []llmtest.Reply
		max    int // requests
	}{
		{"full", agentloop.ModeFull, direct, 2},
		{"deferred", agentloop.ModeDeferred, direct, 2},
		{"search, details fetched (before)", agentloop.ModeSearch, searchOld, 10},
		{"search, call from the signature", agentloop.ModeSearch, searchNew, 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v, err := p.View(t.Name(), nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			s := llmtest.NewServer(t, tc.script...)
			l := newLoop(t, s, agentloop.Config{})
			res, err := l.Run(t.Context(), agentloop.Input{Task: task, Mode: tc.mode, Tools: v})
			if err != nil {
				t.Fatal(err)
			}
			reqs := s.Requests()
			toks := 0
			for _, r := range reqs {
				n, err := toolcache.CountTokens(string(r.Raw))
				if err != nil {
					t.Fatal(err)
				}
				toks += n
			}
			t.Logf("%s: %d tools, %d requests, %d prompt tokens", tc.name, len(v.Tools()), len(reqs), toks)
			if len(v.Tools()) != 500 {
				t.Errorf("%d tools, want 500", len(v.Tools()))
			}
			if len(reqs) > tc.max {
				t.Errorf("%d requests, want at most %d", len(reqs), tc.max)
			}
			for _, m := range toolMessages(res.Messages) {
				if strings.HasPrefix(m.Content, "[") && tc.mode == agentloop.ModeSearch && !strings.Contains(m.Content, `"call":"`) {
					t.Errorf("search answer without signatures: %s", m.Content)
				}
			}
			// Each search found the tool called next.
			msgs := toolMessages(res.Messages)
			for i, m := range msgs {
				if strings.HasPrefix(m.Content, "[") && i+1 < len(msgs) {
					next := tc.script[i+1].ToolCalls[0].Function.Arguments
					var a struct{ Name string }
					_ = json.Unmarshal([]byte(next), &a)
					if !strings.Contains(m.Content, `"name":"`+a.Name+`"`) {
						t.Errorf("search answer %d lacks %s: %s", i, a.Name, m.Content)
					}
				}
			}
		})
	}
}
