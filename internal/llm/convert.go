package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/respjson"
)

// permissiveParameters replaces an absent or null schema: providers reject
// "parameters": null, and an empty object schema accepts any arguments.
var permissiveParameters = json.RawMessage(`{"type":"object"}`)

// toParams maps a Request onto openai-go parameters.
func toParams(req Request, model string) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{Model: model}
	if req.Model != "" {
		p.Model = req.Model
	}
	for i, m := range req.Messages {
		mp, err := messageParam(m)
		if err != nil {
			return p, fmt.Errorf("messages[%d]: %w", i, err)
		}
		p.Messages = append(p.Messages, mp)
	}
	for i, t := range req.Tools {
		raw, err := ToolJSON(t)
		if err != nil {
			return p, fmt.Errorf("tools[%d]: %w", i, err)
		}
		// Override sends our bytes as they are: going through
		// FunctionParameters (a map) would reorder keys and rewrite numbers.
		p.Tools = append(p.Tools, param.Override[openai.ChatCompletionToolUnionParam](raw))
	}
	switch req.ToolChoice {
	case "":
	case "auto", "none", "required":
		p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: param.NewOpt(req.ToolChoice)}
	default: // a tool name forces that function
		p.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: req.ToolChoice})
	}
	return p, nil
}

func messageParam(m Message) (openai.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case RoleSystem:
		return openai.SystemMessage(m.Content), nil
	case "developer":
		return openai.DeveloperMessage(m.Content), nil
	case RoleUser:
		return openai.UserMessage(m.Content), nil
	case RoleTool:
		if m.ToolCallID == "" {
			return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("tool message has no tool_call_id")
		}
		return openai.ToolMessage(m.Content, m.ToolCallID), nil
	case RoleAssistant:
		a := openai.ChatCompletionAssistantMessageParam{}
		// Content is omitted only beside tool calls; a bare assistant turn
		// keeps "" because some providers reject a message without content.
		if m.Content != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = param.NewOpt(m.Content)
		}
		for _, c := range m.ToolCalls {
			fc := &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: c.ID,
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
					Name: c.Function.Name, Arguments: c.Function.Arguments,
				},
			}
			if extra := rawFields("extra_content", c.ExtraContent); extra != nil {
				fc.SetExtraFields(extra)
			}
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{OfFunction: fc})
		}
		if extra := rawFields("reasoning_content", m.ReasoningContent, "reasoning", m.Reasoning, "reasoning_details", m.ReasoningDetails); extra != nil {
			a.SetExtraFields(extra)
		}
		return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	default:
		return openai.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", m.Role)
	}
}

// rawFields maps names to the JSON values given after each, leaving out
// absent ones (nil when all are).
func rawFields(kv ...any) map[string]any {
	var out map[string]any
	for i := 0; i+1 < len(kv); i += 2 {
		if v := kv[i+1].(json.RawMessage); len(v) > 0 {
			if out == nil {
				out = map[string]any{}
			}
			out[kv[i].(string)] = v
		}
	}
	return out
}

// otherArguments reads the arguments of a function call that has no
// "arguments" from the key Llama 3.1's format ("parameters") or
// Anthropic's ("input") gives them under, or "args" (keys, when given,
// are tried first): a string as it is, another value as its JSON; ""
// when there is none.
func otherArguments(function string, keys ...string) string {
	var f map[string]json.RawMessage
	if json.Unmarshal([]byte(function), &f) != nil {
		return ""
	}
	for _, k := range append(keys, "parameters", "input", "args") {
		v := bytes.TrimSpace(f[k])
		if len(v) == 0 || bytes.Equal(v, []byte("null")) {
			continue
		}
		var text string
		if json.Unmarshal(v, &text) == nil {
			return text
		}
		return string(v)
	}
	return ""
}

// rawField is the JSON value of a field the SDK does not know, as the
// server sent it; nil for none or null.
func rawField(f respjson.Field) json.RawMessage {
	// Not f.Valid(): the SDK marks a field it has no type for invalid.
	raw := strings.TrimSpace(f.Raw())
	if raw == "" || raw == "null" || !json.Valid([]byte(raw)) {
		return nil
	}
	return json.RawMessage(raw)
}

// wireTool is the OpenAI "tools" element; field order is the wire order.
type wireTool struct {
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// ToolJSON is the exact JSON one tool is sent as:
// {"type":"function","function":{"name","description","parameters"}}, with
// Parameters compacted but otherwise verbatim, and {"type":"object"} in
// place of an absent or null schema. Token counting uses it so that counts
// match what is sent.
func ToolJSON(t Tool) (json.RawMessage, error) {
	if t.Name == "" {
		return nil, fmt.Errorf("tool has no name")
	}
	params := permissiveParameters
	if trimmed := bytes.TrimSpace(t.Parameters); len(trimmed) > 0 && !bytes.Equal(trimmed, []byte("null")) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, trimmed); err != nil {
			return nil, fmt.Errorf("tool %q parameters: %w", t.Name, err)
		}
		if buf.Bytes()[0] != '{' {
			return nil, fmt.Errorf("tool %q parameters must be a JSON object", t.Name)
		}
		params = buf.Bytes()
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(wireTool{Type: "function", Function: wireFunction{Name: t.Name, Description: t.Description, Parameters: params}}); err != nil {
		return nil, fmt.Errorf("tool %q: %w", t.Name, err)
	}
	return bytes.TrimRight(out.Bytes(), "\n"), nil
}

// fromCompletion maps a reply back to a Response. Requests ask for one
// completion (no n), so a reply of several choices is one reply in parts:
// GitHub Copilot's API sends the text in one choice and the tool calls in
// another, each with index 0. They are merged (mergeChoices).
func fromCompletion(c *openai.ChatCompletion) (Response, error) {
	if c == nil || len(c.Choices) == 0 {
		if c != nil && c.RawJSON() != "" {
			return Response{}, fmt.Errorf("%w: %s", ErrNoChoices, snippet([]byte(c.RawJSON())))
		}
		return Response{}, ErrNoChoices
	}
	resp := Response{
		Model: c.Model,
		Usage: Usage{
			PromptTokens:       tokenCount(c.Usage.PromptTokens),
			CompletionTokens:   tokenCount(c.Usage.CompletionTokens),
			CachedPromptTokens: tokenCount(c.Usage.PromptTokensDetails.CachedTokens),
		},
	}
	if resp.Usage.CachedPromptTokens == 0 {
		// DeepSeek's API counts the prompt's cache hits only under a name
		// of its own.
		resp.Usage.CachedPromptTokens = tokenCount(extraCount(c.Usage.JSON.ExtraFields["prompt_cache_hit_tokens"]))
	}
	mergeChoices(&resp, c.Choices)
	return resp, nil
}

// mergeChoices fills resp's message, finish reason and refusal from the
// parts of one reply: the texts (and refusals) of the choices that have
// one, joined by a line break in choice order; every choice's tool calls,
// in order (a text or a call a later choice repeats is taken once); the
// first reasoning of each kind; and the first choice's finish reason,
// unless that is "stop" or none and a later choice names another
// ("tool_calls", or "length" for a part cut off).
func mergeChoices(resp *Response, choices []openai.ChatCompletionChoice) {
	var texts, refusals []string
	resp.Message.Role = RoleAssistant
	for i, ch := range choices {
		m, refusal := choiceMessage(ch)
		// A part repeated (a proxy that sends its one choice twice) is
		// taken once.
		if m.Content != "" && !slices.Contains(texts, m.Content) {
			texts = append(texts, m.Content)
		}
		if refusal != "" && !slices.Contains(refusals, refusal) {
			refusals = append(refusals, refusal)
		}
		for _, c := range m.ToolCalls {
			if i == 0 || !slices.ContainsFunc(resp.Message.ToolCalls, func(p ToolCall) bool {
				return p.ID == c.ID && p.Function == c.Function && bytes.Equal(p.ExtraContent, c.ExtraContent)
			}) {
				resp.Message.ToolCalls = append(resp.Message.ToolCalls, c)
			}
		}
		if resp.Message.ReasoningContent == nil {
			resp.Message.ReasoningContent = m.ReasoningContent
		}
		if resp.Message.Reasoning == nil {
			resp.Message.Reasoning = m.Reasoning
		}
		if resp.Message.ReasoningDetails == nil {
			resp.Message.ReasoningDetails = m.ReasoningDetails
		}
		if fr := ch.FinishReason; i == 0 || (fr != "" && (resp.FinishReason == "" || resp.FinishReason == "stop")) {
			resp.FinishReason = fr
		}
		if resp.Error == "" {
			resp.Error = choiceError(rawField(ch.JSON.ExtraFields["error"]))
		}
	}
	resp.Message.Content = strings.Join(texts, "\n")
	resp.Refusal = strings.Join(refusals, "\n")
}

// choiceError reads a choice's error (OpenRouter's {"code": 502,
// "message": "..."}, or a string) as "code: message"; "" for none.
func choiceError(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var e struct {
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
	}
	var text string
	switch {
	case json.Unmarshal(raw, &text) == nil:
		return strings.TrimSpace(text)
	case json.Unmarshal(raw, &e) == nil && e.Message != "":
		if code := jsonScalar(e.Code); code != "" {
			return code + ": " + e.Message
		}
		return e.Message
	}
	return snippet(raw)
}

// choiceMessage is one choice's assistant message, and its refusal.
func choiceMessage(ch openai.ChatCompletionChoice) (Message, string) {
	m := ch.Message
	if raw := strings.TrimSpace(ch.JSON.Message.Raw()); raw == "" || raw == "null" {
		// No message: a stream chunk's "delta" (a proxy that streams from
		// upstream and sends the chunk whole), or a legacy completion's
		// "text". Read as the message they stand for.
		var alt struct {
			Delta json.RawMessage `json:"delta"`
			Text  *string         `json:"text"`
		}
		if json.Unmarshal([]byte(ch.RawJSON()), &alt) == nil {
			var d openai.ChatCompletionMessage
			switch {
			case len(alt.Delta) > 0 && json.Unmarshal(alt.Delta, &d) == nil:
				m = d
			case alt.Text != nil:
				return Message{Role: RoleAssistant, Content: *alt.Text}, ""
			}
		}
	}
	msg := Message{Role: RoleAssistant, Content: contentText(m)}
	for _, tc := range m.ToolCalls {
		// Every call is a function call, as it is sent back (messageParam).
		// A custom tool call (OpenAI's {"type": "custom", "custom": {"name",
		// "input"}}), though only functions are offered, is read as one
		// whose arguments are its input, which the loop then judges.
		call := ToolCall{ID: tc.ID, Type: "function", Function: FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}}
		if tc.Type == "custom" && call.Function.Name == "" {
			call.Function = FunctionCall{Name: tc.Custom.Name, Arguments: tc.Custom.Input}
		}
		if call.Function.Name == "" && tc.JSON.Function.Raw() == "" {
			// No function object: the name and arguments beside the id
			// (the Responses API's function_call item, as some proxies
			// translate it).
			var flat struct {
				Name string `json:"name"`
			}
			if json.Unmarshal([]byte(tc.RawJSON()), &flat) == nil && flat.Name != "" {
				call.Function = FunctionCall{Name: flat.Name, Arguments: otherArguments(tc.RawJSON(), "arguments")}
			}
		}
		if call.Function.Arguments == "" && tc.Function.JSON.Arguments.Raw() == "" {
			call.Function.Arguments = otherArguments(tc.Function.RawJSON())
		}
		// The union keeps no extra fields: they are read from its JSON.
		var extra struct {
			ExtraContent json.RawMessage `json:"extra_content"`
		}
		if raw := tc.RawJSON(); strings.Contains(raw, `"extra_content"`) && json.Unmarshal([]byte(raw), &extra) == nil {
			if v := bytes.TrimSpace(extra.ExtraContent); len(v) > 0 && !bytes.Equal(v, []byte("null")) {
				call.ExtraContent = v
			}
		}
		msg.ToolCalls = append(msg.ToolCalls, call)
	}
	//nolint:staticcheck // deliberately read: the deprecated field is what those servers send
	if fc := m.FunctionCall; len(msg.ToolCalls) == 0 && fc.Name != "" {
		// The deprecated function_call, which older servers still send
		// instead of tool_calls: the same call, without an id.
		msg.ToolCalls = []ToolCall{{Type: "function", Function: FunctionCall{Name: fc.Name, Arguments: fc.Arguments}}}
	}
	extra := m.JSON.ExtraFields
	msg.ReasoningContent = rawField(extra["reasoning_content"])
	msg.Reasoning = rawField(extra["reasoning"])
	msg.ReasoningDetails = rawField(extra["reasoning_details"])
	return msg, m.Refusal
}

// extraCount is a count in a field the SDK does not know: a JSON number
// (or a number in a string, as openai-go reads its own counts), else 0.
func extraCount(f respjson.Field) int64 {
	raw := bytes.TrimSpace([]byte(f.Raw()))
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0
		}
		raw = []byte(s)
	}
	n, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsNaN(n) {
		return 0
	}
	return int64(max(0, min(n, maxTokenCount))) // in range before converting
}

// maxTokenCount bounds a reported token count: no reply costs a trillion
// tokens, and sums of a job's counts must not overflow.
const maxTokenCount = 1 << 40

// tokenCount is a reported count as the job accounts it: a negative one
// (a server's "unknown", or a hostile one) is 0, an absurd one the bound.
// Counts feed Prometheus counters, which panic when added a negative value.
func tokenCount(n int64) int64 { return min(max(n, 0), maxTokenCount) }

// ToolsJSON is the "tools" array exactly as Complete sends it: the ToolJSON
// of each tool, in order (nil for no tools). Token accounting counts these
// bytes.
func ToolsJSON(tools []Tool) ([]byte, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	var b bytes.Buffer
	b.WriteByte('[')
	for i, t := range tools {
		if i > 0 {
			b.WriteByte(',')
		}
		j, err := ToolJSON(t)
		if err != nil {
			return nil, err
		}
		b.Write(j)
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

// contentText is the message's text. Some servers (Mistral's reasoning
// models, proxies in front of Anthropic or Gemini) send content as an
// array of parts, which openai-go leaves as that array's JSON text: the
// text parts are joined, and thinking, reasoning and other parts left out.
func contentText(m openai.ChatCompletionMessage) string {
	raw := strings.TrimSpace(m.JSON.Content.Raw())
	if !strings.HasPrefix(raw, "[") {
		return m.Content
	}
	var parts []struct {
		Type string          `json:"type"`
		Text json.RawMessage `json:"text"`
	}
	if json.Unmarshal([]byte(raw), &parts) != nil {
		return m.Content
	}
	var b strings.Builder
	for _, p := range parts {
		var text string
		if (p.Type == "text" || p.Type == "output_text" || p.Type == "") && json.Unmarshal(p.Text, &text) == nil {
			b.WriteString(text)
		}
	}
	return b.String()
}
