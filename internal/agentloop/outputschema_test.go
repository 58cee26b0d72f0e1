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

// A tool's structuredContent was never checked against its outputSchema:
// a code-mode script declared `count(): Promise<{n: number}>` got
// {"n": "x"}, and the model read it as what the tool promised. A result
// that does not conform is now an error result that says why and keeps
// what the tool sent; a conforming one, and one without structuredContent
// (text only), pass as before.
func TestStructuredResultCheckedAgainstOutputSchema(t *testing.T) {
	t.Parallel()
	const outSchema = `{"type":"object","properties":{"n":{"type":"number","minimum":0}},"required":["n"]}`
	s := server.NewMCPServer("counts", "1.0.0", server.WithToolCapabilities(true))
	for name, structured := range map[string]any{
		"count_good": map[string]any{"n": 3},
		"count_bad":  map[string]any{"n": "x"},
		"count_text": nil,
		// math/big refuses the exponent and the schema library's minimum
		// compares its nil *big.Rat: the check panicked, and the call's
		// result was "failed inside the worker", what the tool sent lost.
		"count_huge": json.RawMessage(`{"n":1e-1000001}`),
	} {
		tool := mcp.NewTool(name, mcp.WithDescription("Count."), mcp.WithRawOutputSchema(json.RawMessage(outSchema)))
		s.AddTool(tool, func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if structured == nil {
				return mcp.NewToolResultText("three"), nil
			}
			b, _ := json.Marshal(structured)
			return mcp.NewToolResultStructured(structured, string(b)), nil
		})
	}
	for _, tc := range []struct {
		name string
		mode agentloop.Mode
		call string // tool name, or the code of execute_code
		want string // in the result the model reads
	}{
		{"conforming", agentloop.ModeFull, "count_good", `{"n":3}`},
		{"text only", agentloop.ModeFull, "count_text", "three"},
		{"not conforming", agentloop.ModeFull, "count_bad", "Error: the result of count_bad does not match the tool's outputSchema:\n- at '/n': got string, want number\nWhat the tool sent: {\"n\":\"x\"}"},
		{"not checkable", agentloop.ModeFull, "count_huge", "Error: the result of count_huge could not be checked against the tool's outputSchema:\n- the schema library failed checking its structuredContent (\"runtime error: "},
		{"not checkable, what was sent", agentloop.ModeFull, "count_huge", "What the tool sent: {\"n\":1e-1000001}"},
		{"code, conforming", agentloop.ModeCode, "return (await tools.count_good({})).n + 1", "4"},
		{"code, not conforming", agentloop.ModeCode, "try { await tools.count_bad({}) } catch (e) { return 'caught: ' + e.message }", "caught: the result of count_bad does not match the tool's outputSchema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := oneCallResult(t, tc.mode, tc.call, inProcessView(t, nil, map[string]*server.MCPServer{"counts": s}))
			if !strings.Contains(got, tc.want) {
				t.Errorf("result %q, want %q", got, tc.want)
			}
		})
	}
}

// oneCallResult runs a job whose model makes one call, of the tool named
// call with {} (in code mode: execute_code of the code call) and then
// answers, and returns the tool result the model was sent.
func oneCallResult(t *testing.T, mode agentloop.Mode, call1 string, tools agentloop.ToolSet) string {
	t.Helper()
	c := call(call1, `{}`)
	if mode == agentloop.ModeCode {
		args, _ := json.Marshal(map[string]string{"code": call1})
		c = call(agentloop.ToolExecuteCode, string(args))
	}
	ms := llmtest.NewServer(t, toolReply(c), textReply("Done."))
	if _, err := newLoop(t, ms, agentloop.Config{}).Run(t.Context(), agentloop.Input{Task: "Call.", Mode: mode, Tools: tools}); err != nil {
		t.Fatal(err)
	}
	res := toolMessages(ms.Requests()[1].Messages)
	if len(res) != 1 {
		t.Fatalf("results %s", mustJSON(t, res))
	}
	return res[0].Content
}

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
			v := maskingTools{View: inProcessView(t, nil, map[string]*server.MCPServer{"tokens": s}), secret: token}
			got := oneCallResult(t, tc.mode, tc.call, v)
			if !strings.Contains(got, tc.want) || strings.Contains(got, "outputSchema") || strings.Contains(got, token) {
				t.Errorf("result %q, want %q: the answer conforms, and its token masked", got, tc.want)
			}
		})
	}
}
