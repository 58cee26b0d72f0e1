package agentloop_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// maskingTools is a ToolSet that masks secret in its answers as
// toolcache.View masks its servers' configured credentials: CallTool
// gives the masked answer, CallToolChecked runs check on the answer as
// the server sent it and masks what check returns.
type maskingTools struct {
	*toolcache.View
	secret string
}

func (m maskingTools) mask(r toolcache.Result) toolcache.Result {
	r.Text = strings.ReplaceAll(r.Text, m.secret, "xxxxx")
	r.Structured = json.RawMessage(strings.ReplaceAll(string(r.Structured), m.secret, "xxxxx"))
	return r
}

func (m maskingTools) CallTool(ctx context.Context, name string, args json.RawMessage) (toolcache.Result, error) {
	r, err := m.View.CallTool(ctx, name, args)
	return m.mask(r), err
}

func (m maskingTools) CallToolChecked(ctx context.Context, name string, args json.RawMessage, check func(toolcache.Result) toolcache.Result) (toolcache.Result, error) {
	r, err := m.View.CallTool(ctx, name, args)
	if err == nil && check != nil {
		r = check(r)
	}
	return m.mask(r), err
}

// TestOutputCheckedBeforeMasking: a tool's structuredContent is checked
// against its outputSchema as the server sent it, before the ToolSet
// masks the secrets in it. Checked after (CallTool, then the check), a
// conforming answer holding a token its schema describes by a pattern
// was taken for a violation once the token was "xxxxx", directly and in
// code mode. The model still sees the token masked.
func TestOutputCheckedBeforeMasking(t *testing.T) {
	t.Parallel()
	const token = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
	const outSchema = `{"type":"object","properties":{"token":{"type":"string","pattern":"^ghp_[A-Za-z0-9]{36}$"}},"required":["token"]}`
	s := server.NewMCPServer("tokens", "1.0.0", server.WithToolCapabilities(true))
	s.AddTool(mcp.NewTool("get_token", mcp.WithDescription("The token."), mcp.WithRawOutputSchema(json.RawMessage(outSchema))),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultStructured(map[string]string{"token": token}, "the token is "+token), nil
		})
	for _, tc := range []struct {
		name string
		mode agentloop.Mode
		call string
		want string
	}{
		{"direct", agentloop.ModeFull, "get_token", "the token is xxxxx"},
		{"code", agentloop.ModeCode, "return 'got ' + (await tools.get_token({})).token", "got xxxxx"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := call(tc.call, `{}`)
			if tc.mode == agentloop.ModeCode {
				args, _ := json.Marshal(map[string]string{"code": tc.call})
				c = call(agentloop.ToolExecuteCode, string(args))
			}
			ms := llmtest.NewServer(t, toolReply(c), textReply("Done."))
			v := maskingTools{View: inProcessView(t, nil, map[string]*server.MCPServer{"tokens": s}), secret: token}
			if _, err := newLoop(t, ms, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "Token.", Mode: tc.mode, Tools: v}); err != nil {
				t.Fatal(err)
			}
			res := toolMessages(ms.Requests()[1].Messages)
			if len(res) != 1 {
				t.Fatalf("results %s", mustJSON(t, res))
			}
			got := res[0].Content
			if !strings.Contains(got, tc.want) || strings.Contains(got, "outputSchema") || strings.Contains(got, token) {
				t.Errorf("result %q, want %q: the answer conforms, and its token masked", got, tc.want)
			}
		})
	}
}
