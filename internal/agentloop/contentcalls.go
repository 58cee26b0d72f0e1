package agentloop

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	"github.com/jetagent/jetagent/internal/llm"
)

// Models served through chat templates that their server does not parse
// (vLLM or Ollama without a tool parser, small local models) often write
// tool calls into the content. These are the shapes recognised:
//
//	<tool_call>{"name": ..., "arguments": {...}}</tool_call>   Hermes, Qwen
//	<tool_call><function=NAME><parameter=P>v</parameter></function></tool_call>
//	                                                          Qwen3-Coder
//	<function=NAME>{...}</function>                           Llama 3.x
//	[TOOL_CALLS][{"name": ..., "arguments": {...}}]            Mistral
//	<|python_tag|>{"name": ..., "parameters": {...}}           Llama 3.1
//	```json {"name": ..., "arguments": {...}} ```              fenced JSON
//	{"name": ..., "arguments": {...}}                          the whole content
//
// Tagged shapes are taken whatever the name (an unknown name then gets the
// usual closest-names error), and a tagged call without arguments has none
// ({}); untagged JSON only when it names a known tool and has arguments, so
// an ordinary JSON answer is not mistaken for a call.
var (
	reFunctionTag  = regexp.MustCompile(`(?s)<function=([a-zA-Z0-9_.-]+)>\s*(.*?)\s*(?:</function>|$)`)
	reFence        = regexp.MustCompile("(?s)```[a-zA-Z_]*\\s*\\n?(.*?)```")
	reNameField    = regexp.MustCompile(`"name"\s*:\s*"([^"]+)"`)
	reArgsField    = regexp.MustCompile(`(?s)"(?:arguments|parameters)"\s*:\s*(.*)$`)
	reSpecialTails = regexp.MustCompile(`(?:\s*<\|[a-z_]+\|>)+\s*$`) // <|eom_id|>, <|eot_id|>
)

// contentCall is the JSON shape of a call written as text.
type contentCall struct {
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Parameters json.RawMessage `json:"parameters"`
	Function   *contentCall    `json:"function"` // {"type":"function","function":{...}}
	// Description marks a tool's definition written out (an answer), not
	// a call: untagged JSON with one is not taken.
	Description json.RawMessage `json:"description"`
}

// extractContentCalls returns the tool calls written into content and the
// content with them removed. lookup returns a tool's input schema, and
// whether the tool exists.
func extractContentCalls(content string, round int, lookup func(string) (json.RawMessage, bool)) ([]llm.ToolCall, string) {
	var calls []llm.ToolCall
	addText := func(name, args string) {
		calls = append(calls, llm.ToolCall{
			ID:       callID(round*100 + len(calls)),
			Type:     "function",
			Function: llm.FunctionCall{Name: name, Arguments: args},
		})
	}
	add := func(cc contentCall) { addText(cc.Name, argumentsText(cc)) }
	// functionTags takes the <function=NAME>...</function> calls out of text.
	functionTags := func(text string) string {
		return reFunctionTag.ReplaceAllStringFunc(text, func(m string) string {
			sub := reFunctionTag.FindStringSubmatch(m)
			name, body := sub[1], sub[2]
			if body == "" || strings.HasPrefix(body, "<parameter=") {
				schema, _ := lookup(name)
				addText(name, xmlParameters(body, schema))
			} else {
				addText(name, body) // Llama: JSON arguments (checked later)
			}
			return ""
		})
	}
	known := func(name string) bool { _, ok := lookup(name); return ok }
	rest := content

	// Tagged forms.
	if strings.Contains(rest, "<tool_call>") {
		rest = toolCallTags(rest, func(body string) bool {
			if strings.HasPrefix(body, "<function=") {
				functionTags(body) // Qwen3-Coder
				return true
			}
			if ccs, ok := parseCallSeq(body, false); ok {
				for _, cc := range ccs {
					add(cc)
				}
				return true
			}
			// JSON as small models write it (single quotes, trailing
			// commas, doubled or missing outer braces) is repaired.
			for _, b := range []string{unwrapBraces(body), "{" + body + "}"} {
				raw, ok := lenientJSON(b)
				if !ok {
					continue
				}
				if ccs, ok := decodeCalls(raw, false); ok {
					for _, cc := range ccs {
						add(cc)
					}
					return true
				}
			}
			// A tagged call whose JSON is broken still is a call: pass
			// the text on so the model is told its arguments are invalid.
			name := reNameField.FindStringSubmatch(body)
			if name == nil {
				return false
			}
			addText(name[1], brokenArguments(body))
			return true
		})
	}
	if strings.Contains(rest, "<function=") {
		rest = functionTags(rest)
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
		body := reSpecialTails.ReplaceAllString(rest[i+len("<|python_tag|>"):], "")
		if ccs, ok := parseCallJSON(body); ok {
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

// toolCallTags offers the body of each <tool_call> tag (up to its
// </tool_call>, the next <tool_call> or the end) to take, trimmed, and
// returns text without the tags taken. A tag not taken (prose mentioning
// it, say in a model's thinking) stays as it was.
func toolCallTags(text string, take func(body string) bool) string {
	const open, closing = "<tool_call>", "</tool_call>"
	segs := strings.Split(text, open)
	var b strings.Builder
	b.WriteString(segs[0])
	for _, seg := range segs[1:] {
		body, after, closed := strings.Cut(seg, closing)
		if take(strings.TrimSpace(body)) {
			b.WriteString(after)
			continue
		}
		b.WriteString(open)
		b.WriteString(body)
		if closed {
			b.WriteString(closing)
		}
		b.WriteString(after)
	}
	return b.String()
}

// xmlParameters turns Qwen3-Coder's <parameter=P>value</parameter> list
// into a JSON object, in the order written. As its template writes them,
// a value loses one leading and one trailing newline; it is a string when
// the schema types the property as one (or the value is not JSON), else
// the JSON value it spells.
func xmlParameters(body string, schema json.RawMessage) string {
	var s struct {
		Properties map[string]struct {
			Type json.RawMessage `json:"type"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s)
	isString := func(p string) bool {
		t := s.Properties[p].Type
		var one string
		var many []string
		return (json.Unmarshal(t, &one) == nil && one == "string") ||
			(json.Unmarshal(t, &many) == nil && slices.Contains(many, "string"))
	}
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	for _, seg := range strings.Split(body, "<parameter=")[1:] {
		name, val, ok := strings.Cut(seg, ">")
		if !ok {
			continue
		}
		val, _, _ = strings.Cut(val, "</parameter>")
		val = strings.TrimPrefix(val, "\n")
		val = strings.TrimSuffix(val, "\n")
		k, _ := json.Marshal(strings.TrimSpace(name))
		var v []byte
		if !isString(strings.TrimSpace(name)) && json.Valid([]byte(val)) {
			v = compactJSON(json.RawMessage(strings.TrimSpace(val)))
		} else {
			v, _ = json.Marshal(val)
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
		n++
	}
	b.WriteByte('}')
	return b.String()
}

// parseCallJSON decodes one call object or an array of them, and nothing
// else (trailing text makes it fail). Every call must carry arguments.
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
	return decodeCalls(raw, true)
}

// parseCallSeq decodes the body of a tag: one or more call objects or
// arrays of them, one after the other. Calls without arguments are taken
// with none unless requireArgs.
func parseCallSeq(s string, requireArgs bool) ([]contentCall, bool) {
	s = strings.TrimSpace(s)
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(s))
	var all []contentCall
	for dec.More() {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		ccs, ok := decodeCalls(raw, requireArgs)
		if !ok {
			return nil, false
		}
		all = append(all, ccs...)
	}
	return all, len(all) > 0
}

// decodeCalls decodes raw, a call object or an array of them.
func decodeCalls(raw json.RawMessage, requireArgs bool) ([]contentCall, bool) {
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
		if cc.Name == "" {
			return nil, false
		}
		if requireArgs && cc.Description != nil {
			return nil, false
		}
		if cc.Arguments == nil && cc.Parameters == nil {
			if requireArgs {
				return nil, false
			}
			ccs[i].Arguments = json.RawMessage(`{}`)
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

// unwrapBraces drops doubled outer braces ({{...}}, a chat template's
// escaping leaking into the output) while the inner text is one object.
func unwrapBraces(body string) string {
	for strings.HasPrefix(body, "{{") && strings.HasSuffix(body, "}}") {
		inner := strings.TrimSpace(body[1 : len(body)-1])
		if spanEnd(inner, 0) != len(inner) {
			break
		}
		body = inner
	}
	return body
}
