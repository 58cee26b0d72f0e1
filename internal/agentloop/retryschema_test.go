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
