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

// bigSchema is an input schema of n top-level parameters (every third
// required), each with a long description, an enum and a nested object:
// far over the 16 KiB tool output limit.
func bigSchema(n int) (schema json.RawMessage, names []string) {
	props := make([]string, n)
	var required []string
	for i := range n {
		name := fmt.Sprintf("param_%03d", i)
		names = append(names, name)
		if i%3 == 0 {
			required = append(required, `"`+name+`"`)
		}
		props[i] = fmt.Sprintf(`%q:{"type":"string","description":%q,"enum":["alpha_%d","beta_%d","gamma_%d"],"default":"alpha_%d"}`,
			name, strings.Repeat(fmt.Sprintf("Parameter %d controls one aspect of the report. ", i), 8), i, i, i, i)
	}
	props = append(props, `"nested":{"type":"object","properties":{"deep":{"type":"object","description":"`+strings.Repeat("deep ", 500)+`"}}}`)
	names = append(names, "nested")
	return json.RawMessage(`{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(required, ",") + `]}`), names
}

// get_tool_details of a tool whose details are over the tool output
// limit was cut there, mid-schema: JSON the model could not read. It now
// answers a valid JSON summary naming every top-level parameter with its
// type and whether it is required, and saying calls are still validated
// against the full schema; search_tools with many hits of long
// signatures stays valid JSON too (the hits that fit, and how many more).
func TestOversizedDetailsStayValidJSON(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		props     int
		maxOutput int
		all       bool // every parameter is named
		mode      agentloop.Mode
	}{
		{"200 parameters", 200, 0, true, agentloop.ModeSearch},
		{"200 parameters, a 4 KiB limit", 200, 4 << 10, false, agentloop.ModeSearch},
		{"2000 parameters", 2000, 0, false, agentloop.ModeSearch},
		{"the minimum limit", 200, 256, false, agentloop.ModeSearch},
		// Code mode's TypeScript declarations ended mid-interface.
		{"code mode", 200, 0, true, agentloop.ModeCode},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			schema, names := bigSchema(tt.props)
			s := server.NewMCPServer("big", "1", server.WithToolCapabilities(true))
			s.AddTool(mcp.NewToolWithRawSchema("make_report", "Make a report. "+strings.Repeat("It has many options. ", 2000), schema),
				func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return mcp.NewToolResultText("done"), nil
				})
			v := inProcessView(t, nil, map[string]*server.MCPServer{"big": s})
			ms := llmtest.NewServer(t, toolReply(call("get_tool_details", `{"name":"make_report"}`)), textReply("done"))
			res, err := newLoop(t, ms, agentloop.Config{MaxToolOutput: tt.maxOutput}).Run(t.Context(), agentloop.Input{Task: "x", Mode: tt.mode, Tools: v})
			if err != nil {
				t.Fatal(err)
			}
			answer := toolMessages(res.Messages)[0].Content
			out := answer
			if tt.mode == agentloop.ModeCode {
				head, rest, _ := strings.Cut(answer, "\n")
				if !strings.HasPrefix(head, "// The TypeScript declarations of tools.make_report") || !strings.Contains(head, "await tools.make_report(") {
					t.Errorf("code mode's answer starts %q", head)
				}
				out = rest
			}
			limit := tt.maxOutput
			if limit == 0 {
				limit = agentloop.DefaultMaxToolOutput
			}
			if !json.Valid([]byte(out)) || len(answer) > limit {
				t.Fatalf("answer of %d bytes (limit %d) is not valid JSON: ...%s", len(out), limit, out[max(0, len(out)-300):])
			}
			var got struct {
				Name       string                     `json:"name"`
				Parameters map[string]json.RawMessage `json:"parameters"`
				Required   []string                   `json:"required"`
				NotShown   int                        `json:"parameters_not_shown"`
				Note       string                     `json:"note"`
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatal(err)
			}
			if got.Name != "make_report" || !strings.Contains(got.Note, "validated against the full schema") && tt.maxOutput != 256 {
				t.Errorf("name %q, note %q", got.Name, got.Note)
			}
			required := map[string]bool{}
			for _, n := range got.Required {
				required[n] = true
			}
			optionalShown, requiredLeft := false, false
			for _, n := range names {
				v, ok := got.Parameters[n]
				var i int
				_, err := fmt.Sscanf(n, "param_%d", &i)
				isParam := err == nil
				if !ok {
					if tt.all {
						t.Errorf("parameter %s not named", n)
					}
					if isParam && i%3 == 0 {
						requiredLeft = true
					}
					continue
				}
				if isParam && (required[n] != (i%3 == 0) || !strings.Contains(string(v), "alpha_")) {
					t.Errorf("parameter %s: %s, required %v", n, v, required[n])
				}
				if !required[n] {
					optionalShown = true
				}
			}
			if len(got.Parameters)+got.NotShown != len(names) {
				t.Errorf("%d shown + %d not shown, want %d", len(got.Parameters), got.NotShown, len(names))
			}
			if optionalShown && requiredLeft {
				t.Errorf("an optional parameter is shown and a required one is not")
			}
		})
	}
}

func TestOversizedSearchAnswerStaysValidJSON(t *testing.T) {
	t.Parallel()
	s := server.NewMCPServer("big", "1", server.WithToolCapabilities(true))
	for i := range 60 {
		schema, _ := bigSchema(30)
		s.AddTool(mcp.NewToolWithRawSchema(fmt.Sprintf("report_%02d", i), "Make a report. "+strings.Repeat("Report words. ", 20), schema),
			func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("done"), nil
			})
	}
	v := inProcessView(t, nil, map[string]*server.MCPServer{"big": s})
	ms := llmtest.NewServer(t, toolReply(call("search_tools", `{"query":"make a report","limit":50}`)), textReply("done"))
	res, err := newLoop(t, ms, agentloop.Config{MaxToolOutput: 8 << 10}).Run(t.Context(), agentloop.Input{Task: "x", Mode: agentloop.ModeSearch, Tools: v})
	if err != nil {
		t.Fatal(err)
	}
	out := toolMessages(res.Messages)[0].Content
	note, hits, ok := strings.Cut(out, "\n")
	if !ok || !strings.HasPrefix(note, "Note: ") || !strings.Contains(note, "more hits do not fit") || !json.Valid([]byte(hits)) || len(out) > 8<<10 {
		t.Fatalf("answer of %d bytes is not a note and valid JSON:\n%s", len(out), out)
	}
	var got []struct{ Name string }
	if err := json.Unmarshal([]byte(hits), &got); err != nil || len(got) == 0 {
		t.Fatalf("hits %v, %v", got, err)
	}
}
