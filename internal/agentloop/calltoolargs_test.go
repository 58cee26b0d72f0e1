package agentloop_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// call_tool's arguments as other models write them: without "arguments"
// for a tool without parameters, beside "name", or under "parameters" or
// "input". Each was refused against call_tool's own schema ("missing
// property 'arguments'"), and the retry showed call_tool's schema, not the
// tool's: the model could not see what the tool wanted. They now run
// the tool, checked against its own schema, and the reflected transcript
// holds the real call.
func TestCallToolArgumentsOtherwise(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, args string
		want       string // the result
		input      string // the reflected call's input; "" for none
	}{
		{"no arguments, no parameters", `{"name":"fail"}`, "Error: the backend is down", `{}`},
		{"arguments null", `{"name":"fail","arguments":null}`, "Error: the backend is down", `{}`},
		{"arguments beside name", `{"name":"echo","text":"hi","repeat":2}`, "hihi", `{"repeat":2,"text":"hi"}`},
		{"under parameters", `{"name":"echo","parameters":{"text":"hi"}}`, "hi", `{"text":"hi"}`},
		{"under input", `{"name":"echo","input":{"text":"hi"}}`, "hi", `{"text":"hi"}`},
		{"input, a parameter of the tool", `{"name":"transform","input":{"a":1}}`, `{"input":{"a":1}}`, `{"input":{"a":1}}`},
		{"no arguments, required parameters: the tool's schema", `{"name":"echo"}`,
			"Error: invalid arguments for tool echo:\n- at '': missing property 'text'\nInput schema of echo: ", ""},
		{"unknown tool", `{"name":"nope","text":"hi"}`, `Error: unknown tool "nope"; closest names: `, ""},
		{"arguments and more", `{"name":"echo","arguments":{"text":"hi"},"text":"x"}`,
			"Error: invalid arguments for tool call_tool:\n- at '': additional properties 'text' not allowed", ""},
	}
	var ts testServer
	tools := newToolSet(t, &ts, false)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, toolReply(call("call_tool", tc.args)), textReply("done"))
			res, err := newLoop(t, s, agentloop.Config{SchemaRetries: -1}).Run(t.Context(), agentloop.Input{
				Task: "x", Mode: agentloop.ModeSearch, Tools: tools,
				ClientTools: []clienttools.Decl{{Name: "transform", Description: "Transform an input.",
					InputSchema: json.RawMessage(`{"type":"object","properties":{"input":{"type":"object"}},"required":["input"]}`)}},
				ClientCaller: func(_ context.Context, _ string, args json.RawMessage) (string, error) { return string(args), nil },
			})
			if err != nil {
				t.Fatal(err)
			}
			if out := toolMessages(res.Messages)[0].Content; !strings.HasPrefix(out, tc.want) {
				t.Errorf("answer %q, want it to begin %q", out, tc.want)
			}
			switch {
			case tc.input == "" && len(res.Records) > 0:
				t.Errorf("records %s, want none", mustJSON(t, res.Records))
			case tc.input != "" && (len(res.Records) != 1 || compact(t, res.Records[0].Input) != tc.input):
				t.Errorf("records %s, want one with input %s", mustJSON(t, res.Records), tc.input)
			}
		})
	}
}
