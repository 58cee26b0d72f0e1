package agentloop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/jetagent/jetagent/internal/llm"
)

// Models served through chat templates that their server does not parse
// (vLLM or Ollama without a tool parser, small local models) often write
// tool calls into the content. These are the shapes recognised:
//
//	<tool_call>{"name": ..., "arguments": {...}}</tool_call>   Hermes, Qwen
//	<function=NAME>{...}</function>                           Llama 3.x
//	[TOOL_CALLS][{"name": ..., "arguments": {...}}]            Mistral
//	<|python_tag|>{"name": ..., "parameters": {...}}           Llama 3.1
//	```json {"name": ..., "arguments": {...}} ```              fenced JSON
//	{"name": ..., "arguments": {...}}                          the whole content
//
// Tagged shapes are taken whatever the name (an unknown name then gets the
// usual closest-names error); untagged JSON only when it names a known tool,
// so an ordinary JSON answer is not mistaken for a call.
var (
	reToolCallTag = regexp.MustCompile(`(?s)<tool_call>\s*(.*?)\s*(?:</tool_call>|$)`)
	reFunctionTag = regexp.MustCompile(`(?s)<function=([a-zA-Z0-9_.-]+)>\s*(.*?)\s*(?:</function>|$)`)
	reFence       = regexp.MustCompile("(?s)```[a-zA-Z_]*\\s*\\n?(.*?)```")
	reNameField   = regexp.MustCompile(`"name"\s*:\s*"([^"]+)"`)
	reArgsField   = regexp.MustCompile(`(?s)"(?:arguments|parameters)"\s*:\s*(.*)$`)
)

// contentCall is the JSON shape of a call written as text.
type contentCall struct {
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Parameters json.RawMessage `json:"parameters"`
	Function   *contentCall    `json:"function"` // {"type":"function","function":{...}}
}

// extractContentCalls returns the tool calls written into content and the
// content with them removed. known reports whether a name is a tool.
func extractContentCalls(content string, round int, known func(string) bool) ([]llm.ToolCall, string) {
	var calls []llm.ToolCall
	add := func(cc contentCall) {
		calls = append(calls, llm.ToolCall{
			ID:       fmt.Sprintf("call_content_%d_%d", round, len(calls)),
			Type:     "function",
			Function: llm.FunctionCall{Name: cc.Name, Arguments: argumentsText(cc)},
		})
	}
	rest := content

	// Tagged forms.
	if strings.Contains(rest, "<tool_call>") {
		rest = reToolCallTag.ReplaceAllStringFunc(rest, func(m string) string {
			body := reToolCallTag.FindStringSubmatch(m)[1]
			ccs, ok := parseCallJSON(body)
			if !ok {
				// A tagged call whose JSON is broken still is a call: pass
				// the text on so the model is told its arguments are invalid.
				name := reNameField.FindStringSubmatch(body)
				if name == nil {
					return m
				}
				calls = append(calls, llm.ToolCall{
					ID:       fmt.Sprintf("call_content_%d_%d", round, len(calls)),
					Type:     "function",
					Function: llm.FunctionCall{Name: name[1], Arguments: brokenArguments(body)},
				})
				return ""
			}
			for _, cc := range ccs {
				add(cc)
			}
			return ""
		})
	}
	if strings.Contains(rest, "<function=") {
		rest = reFunctionTag.ReplaceAllStringFunc(rest, func(m string) string {
			sub := reFunctionTag.FindStringSubmatch(m)
			args := strings.TrimSpace(sub[2])
			if args == "" {
				args = "{}"
			}
			add(contentCall{Name: sub[1], Arguments: json.RawMessage(args)})
			return ""
		})
	}
	if i := strings.Index(rest, "[TOOL_CALLS]"); i >= 0 {
		if ccs, ok := parseCallJSON(rest[i+len("[TOOL_CALLS]"):]); ok {
			for _, cc := range ccs {
				add(cc)
			}
			rest = rest[:i]
		}
	}
	if i := strings.Index(rest, "<|python_tag|>"); i >= 0 {
		if ccs, ok := parseCallJSON(rest[i+len("<|python_tag|>"):]); ok {
			for _, cc := range ccs {
				add(cc)
			}
			rest = rest[:i]
		}
	}
	if len(calls) > 0 {
		return calls, strings.TrimSpace(rest)
	}

	// Untagged JSON: only when every call names a known tool.
	allKnown := func(ccs []contentCall) bool {
		for _, cc := range ccs {
			if !known(cc.Name) {
				return false
			}
		}
		return len(ccs) > 0
	}
	rest = reFence.ReplaceAllStringFunc(rest, func(m string) string {
		ccs, ok := parseCallJSON(reFence.FindStringSubmatch(m)[1])
		if !ok || !allKnown(ccs) {
			return m
		}
		for _, cc := range ccs {
			add(cc)
		}
		return ""
	})
	if len(calls) > 0 {
		return calls, strings.TrimSpace(rest)
	}
	if ccs, ok := parseCallJSON(rest); ok && allKnown(ccs) {
		for _, cc := range ccs {
			add(cc)
		}
		return calls, ""
	}
	return nil, content
}

// parseCallJSON decodes one call object or an array of them, and nothing
// else (trailing text makes it fail).
func parseCallJSON(s string) ([]contentCall, bool) {
	s = strings.TrimSpace(s)
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(s))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, false
	}
	if dec.More() || strings.TrimSpace(s[dec.InputOffset():]) != "" {
		return nil, false
	}
	var ccs []contentCall
	if raw[0] == '[' {
		if err := json.Unmarshal(raw, &ccs); err != nil {
			return nil, false
		}
	} else {
		var cc contentCall
		if err := json.Unmarshal(raw, &cc); err != nil {
			return nil, false
		}
		ccs = []contentCall{cc}
	}
	for i, cc := range ccs {
		if cc.Function != nil && cc.Name == "" {
			ccs[i] = *cc.Function
			cc = ccs[i]
		}
		if cc.Name == "" || (cc.Arguments == nil && cc.Parameters == nil) {
			return nil, false
		}
	}
	return ccs, len(ccs) > 0
}

// argumentsText is the arguments as the JSON text a tool_calls entry would
// carry; a JSON string holding the arguments is unwrapped.
func argumentsText(cc contentCall) string {
	a := cc.Arguments
	if a == nil {
		a = cc.Parameters
	}
	a = bytes.TrimSpace(a)
	if len(a) > 0 && a[0] == '"' {
		var s string
		if json.Unmarshal(a, &s) == nil {
			return s
		}
	}
	return string(a)
}

// brokenArguments is the best guess at the arguments text of a call whose
// JSON does not parse: what follows "arguments": (minus the closing brace of
// the call), else the whole body. It stays invalid, and is reported so.
func brokenArguments(body string) string {
	m := reArgsField.FindStringSubmatch(body)
	if m == nil {
		return body
	}
	a := strings.TrimSpace(m[1])
	return strings.TrimSpace(strings.TrimSuffix(a, "}"))
}
