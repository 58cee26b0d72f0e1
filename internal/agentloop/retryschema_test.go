package agentloop_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// The schema retry quoted a failing tool's whole input schema in its
// note, and deferred mode put the whole definition into the tools array
// too: a server's 5 MB schema (within every bound of the pool) made a
// retry request of over 10 MB, which a provider refuses, failing the job
// where the model would have been told what was wrong. A schema over the
// quoting bound is now named, not quoted (the violations still are); a
// small one is quoted as before.
func TestRetryDoesNotQuoteHugeSchemas(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"type":"object","required":["city"],"properties":{"city":{"type":"string"}`)
	for i := range 3000 {
		fmt.Fprintf(&b, `,"field_%d":{"type":"string","description":"%s"}`, i, strings.Repeat("padding ", 40))
	}
	b.WriteString(`},"additionalProperties":false}`)
	huge := b.String()
	s := server.NewMCPServer("big", "1", server.WithToolCapabilities(true))
	h := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	}
	s.AddTool(mcp.NewToolWithRawSchema("huge", "A tool with a huge schema.", json.RawMessage(huge)), h)
	s.AddTool(mcp.NewToolWithRawSchema("small", "A tool with a small schema.", json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)), h)
	v := inProcessView(t, nil, map[string]*server.MCPServer{"big": s})
	for _, tt := range []struct {
		mode       agentloop.Mode
		call, args string
	}{
		{agentloop.ModeDeferred, "huge", `{"town":"Lima"}`},
		{agentloop.ModeSearch, "call_tool", `{"name":"huge","arguments":{"town":"Lima"}}`},
	} {
		t.Run(string(tt.mode), func(t *testing.T) {
			t.Parallel()
			small := call("small", `{"n":"one"}`)
			if tt.mode == agentloop.ModeSearch {
				small = call("call_tool", `{"name":"small","arguments":{"n":"one"}}`)
			}
			ms := llmtest.NewServer(t, toolReply(call(tt.call, tt.args), small), textReply("Sorry."), textReply("Done."))
			if _, err := newLoop(t, ms, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "Weather in Lima.", Mode: tt.mode, Tools: v}); err != nil {
				t.Fatal(err)
			}
			retry := ms.Requests()[1]
			if n := len(retry.Raw); n > 64<<10 {
				t.Errorf("the retry request is %d bytes, for a schema of %d", n, len(huge))
			}
			note := retry.Messages[len(retry.Messages)-1].Content
			for _, want := range []string{
				"missing property 'city'",
				fmt.Sprintf("The input schema of huge (%d KiB) is too large to quote", len(huge)>>10),
				`Full input schema of small: {"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`,
			} {
				if !strings.Contains(note, want) {
					t.Errorf("the note does not say %q:\n%.2000s", want, note)
				}
			}
		})
	}
}

// In deferred mode the schema retry put a failing tool's whole
// definition into the tools array: its schema was bounded
// (maxQuotedSchema), its description was not, so a server's tool of a
// 1 MB description made a retry request of as much, which a provider
// refuses (or bills for). A description over the bound keeps the one
// line deferred mode sent; the schema still comes in full.
func TestRetryDoesNotSendHugeDescriptions(t *testing.T) {
	t.Parallel()
	const schema = `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`
	long := "Count things. " + strings.Repeat("More words about counting. ", 1<<20/27)
	s := server.NewMCPServer("descs", "1", server.WithToolCapabilities(true))
	h := func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	}
	s.AddTool(mcp.NewToolWithRawSchema("long_desc", long, json.RawMessage(schema)), h)
	s.AddTool(mcp.NewToolWithRawSchema("short_desc", "Count things. Short.", json.RawMessage(schema)), h)
	v := inProcessView(t, nil, map[string]*server.MCPServer{"descs": s})
	for _, tt := range []struct {
		tool, wantDesc string
	}{
		{"long_desc", "Count things."},
		{"short_desc", "Count things. Short."},
	} {
		t.Run(tt.tool, func(t *testing.T) {
			t.Parallel()
			ms := llmtest.NewServer(t, toolReply(call(tt.tool, `{"n":"one"}`)), textReply("Done."))
			if _, err := newLoop(t, ms, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "Count.", Mode: agentloop.ModeDeferred, Tools: v}); err != nil {
				t.Fatal(err)
			}
			retry := ms.Requests()[1]
			if n := len(retry.Raw); n > 64<<10 {
				t.Errorf("the retry request is %d bytes", n)
			}
			got, ok := toolByName(retry.Tools, tt.tool)
			if !ok || got.Description != tt.wantDesc || compact(t, got.Parameters) != compact(t, []byte(schema)) {
				t.Errorf("the retry offers %s as %.200q with %s, want %q with its full schema", tt.tool, got.Description, got.Parameters, tt.wantDesc)
			}
		})
	}
}
