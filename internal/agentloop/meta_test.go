package agentloop_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// A search_tools server filter that names no server of the job says which
// servers the job has and the one it most likely meant: a server the
// pool has but the job was not given answered "no tools are available",
// and a typo only "no server is named".
func TestSearchToolsServerFilterNamesTheJobsServers(t *testing.T) {
	t.Parallel()
	var ts testServer
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	servers := map[string]*server.MCPServer{"weather-tools": newTestMCPServer(&ts, false), "other": newTestMCPServer(&ts, false)}
	opts := []toolcache.Option{toolcache.WithLogger(slog.New(slog.DiscardHandler))}
	for name, s := range servers {
		opts = append(opts, toolcache.WithInProcessServer(name, s, toolcache.ServerConfig{}))
	}
	p, err := toolcache.NewPool(ctx, toolcache.Config{}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	view, err := p.View(t.Name(), []string{"weather-tools"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = view.Close() })

	tests := []struct {
		name, search string
		want         []string
		not          []string
	}{
		{"typo", `{"query":"echo","server":"wether-tools"}`,
			[]string{`Note: no server of this job is named "wether-tools"; did you mean "weather-tools"?`, `__echo"`}, nil},
		{"part of the name", `{"query":"echo","server":"weather"}`,
			[]string{`did you mean "weather-tools"?`, `__echo"`}, nil},
		{"a server of the pool the job was not given", `{"query":"echo","server":"other"}`,
			[]string{`Note: no server of this job is named "other"; its servers: "weather-tools".`}, []string{`"name"`, "did you mean"}},
		{"unknown", `{"query":"echo","server":"zzz"}`,
			[]string{`Note: no server of this job is named "zzz"; its servers: "weather-tools".`}, []string{`"name"`}},
		{"right name, other case", `{"query":"echo","server":"Weather-Tools"}`,
			[]string{`__echo"`}, []string{"Note:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, toolReply(call("search_tools", tc.search)), textReply("done"))
			l := newLoop(t, s, agentloop.Config{})
			res, err := l.Run(t.Context(), agentloop.Input{Task: "x", Mode: agentloop.ModeSearch, Tools: view})
			if err != nil {
				t.Fatal(err)
			}
			out := toolMessages(res.Messages)[0].Content
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("answer lacks %s:\n%s", w, out)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(out, w) {
					t.Errorf("answer has %s:\n%s", w, out)
				}
			}
		})
	}
}

// A meta tool reached through call_tool or get_tool_details, as if it were
// in the catalog, is answered with what to do instead of the closest
// catalog names; an empty query says it is empty.
func TestMetaToolsMisused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, tool, args string
		want             string
	}{
		{"call_tool through call_tool", "call_tool", `{"name":"call_tool","arguments":{"name":"echo","arguments":{"text":"hi"}}}`,
			`Error: "call_tool" is not a tool of the catalog: call it directly`},
		{"search_tools through call_tool", "call_tool", `{"name":"search_tools","arguments":{"query":"echo"}}`,
			`Error: "search_tools" is not a tool of the catalog: call it directly`},
		{"details of a meta tool", "get_tool_details", `{"name":"get_tool_details"}`,
			`Error: "get_tool_details" is not a tool of the catalog: call it directly`},
		{"a catalog tool still", "call_tool", `{"name":"echo","arguments":{"text":"hi"}}`, "hi"},
		{"empty query", "search_tools", `{"query":"  "}`, "Note: the query is empty; these are the first tools by name."},
	}
	var ts testServer
	tools := newToolSet(t, &ts, false)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, toolReply(call(tc.tool, tc.args)), textReply("done"))
			l := newLoop(t, s, agentloop.Config{})
			res, err := l.Run(t.Context(), agentloop.Input{Task: "x", Mode: agentloop.ModeSearch, Tools: tools})
			if err != nil {
				t.Fatal(err)
			}
			if out := toolMessages(res.Messages)[0].Content; !strings.HasPrefix(out, tc.want) {
				t.Errorf("answer %q, want it to begin %q", out, tc.want)
			}
		})
	}
}
