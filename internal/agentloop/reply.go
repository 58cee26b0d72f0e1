package agentloop

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/jetagent/jetagent/internal/llm"
)

// How model servers other than OpenAI's shape their replies, and how the
// loop reads them: finish reasons under other names, reasoning left in the
// content, arguments and tool names a server or a small model wraps.

// finishKind is a finish reason's meaning, whatever the server calls it.
type finishKind int

const (
	finishOther         finishKind = iota
	finishLength                   // cut off at the output token limit
	finishFiltered                 // stopped by a content filter
	finishAbandoned                // the server gave up on the generation
	finishMalformedCall            // the server could not read the call the model made
)

// classifyFinish reads a finish reason: OpenAI's, and the names proxies
// pass on from Anthropic (max_tokens, refusal), Gemini (MAX_TOKENS,
// SAFETY, RECITATION, MALFORMED_FUNCTION_CALL, ...), Bedrock
// (guardrail_intervened), OpenRouter (error), vLLM (abort) and DeepSeek
// (insufficient_system_resource: cut short for want of resources).
func classifyFinish(reason string) finishKind {
	switch strings.ToLower(strings.TrimSpace(reason)) {
	case "length", "max_tokens", "max_output_tokens", "model_length":
		return finishLength
	case "content_filter", "safety", "recitation", "blocklist", "prohibited_content", "spii", "image_safety",
		"refusal", "guardrail_intervened":
		return finishFiltered
	case "error", "abort", "insufficient_system_resource":
		return finishAbandoned
	case "malformed_function_call", toolUseFailed:
		return finishMalformedCall
	}
	return finishOther
}

// toolUseFailed is the code of Groq's refusal (400) of a reply whose tool
// call it could not read; the loop takes it as that reply, with this as
// its finish reason (see complete).
const toolUseFailed = "tool_use_failed"

// malformedReason is what a reply whose finish reason is
// finishMalformedCall (and which has no call the loop could read) failed
// by.
func malformedReason(finish string) string {
	if finish == toolUseFailed {
		return fmt.Sprintf("the server could not read the tool call it made (it refused the reply: %s)", toolUseFailed)
	}
	return fmt.Sprintf("the server could not read the tool call it made (finish_reason %q)", finish)
}

// replyError judges a reply by its finish reason: nil when it may be used.
// A reply cut off at the token limit is usable only for its tool calls
// (whose arguments are then checked like any): its text is not a whole
// answer.
func replyError(resp llm.Response) error {
	fr := resp.FinishReason
	switch classifyFinish(fr) {
	case finishFiltered:
		if text := strings.TrimSpace(resp.Message.Content); text != "" {
			return fmt.Errorf("%w: finish_reason %q after %s", ErrRefused, fr, quoteTail(text))
		}
		return fmt.Errorf("%w: finish_reason %q, no text", ErrRefused, fr)
	case finishLength:
		if len(resp.Message.ToolCalls) > 0 {
			return nil
		}
		what := "before any text (all of it reasoning, if the server keeps that apart)"
		if text := strings.TrimSpace(resp.Message.Content); text != "" {
			what = fmt.Sprintf("after %d bytes of text, ending %s", len(text), quoteTail(text))
		}
		return fmt.Errorf("%w: finish_reason %q with %d completion tokens, %s; raise the server's output limit (max_tokens, num_predict, n_predict)",
			ErrTruncated, fr, resp.Usage.CompletionTokens, what)
	case finishAbandoned:
		if resp.Error != "" {
			return fmt.Errorf("%w: finish_reason %q: %s", ErrReplyAbandoned, fr, resp.Error)
		}
		return fmt.Errorf("%w: finish_reason %q", ErrReplyAbandoned, fr)
	}
	if resp.Refusal != "" && len(resp.Message.ToolCalls) == 0 && strings.TrimSpace(resp.Message.Content) == "" {
		// OpenAI's refusal field: no content, finish_reason "stop".
		return fmt.Errorf("%w: %s", ErrRefused, resp.Refusal)
	}
	return nil
}

// quoteTail quotes the last 120 bytes of s, on a rune boundary.
func quoteTail(s string) string {
	const n = 120
	if len(s) <= n {
		return fmt.Sprintf("%q", s)
	}
	cut := len(s) - n
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return fmt.Sprintf("...%q", s[cut:])
}

// answerText is content without the reasoning that servers without a
// reasoning parser leave in it: leading <think> (or <thinking>,
// <reasoning>) blocks, all of an unclosed one, and Harmony's analysis
// channel before its final message (gpt-oss without a parser). What is
// left is the answer; "" when it was all reasoning.
func answerText(content string) string {
	const final = "<|channel|>final<|message|>"
	if i := strings.LastIndex(content, final); i >= 0 {
		content = content[i+len(final):]
		for _, end := range []string{"<|return|>", "<|end|>"} {
			content = strings.TrimSuffix(strings.TrimSpace(content), end)
		}
	}
	for {
		trimmed := strings.TrimLeftFunc(content, unicode.IsSpace)
		open, close := "", ""
		for _, tag := range []string{"think", "thinking", "reasoning"} {
			if strings.HasPrefix(trimmed, "<"+tag+">") {
				open, close = "<"+tag+">", "</"+tag+">"
				break
			}
		}
		if open == "" {
			return content
		}
		end := strings.Index(trimmed, close)
		if end < 0 {
			return "" // cut off while thinking, or never closed
		}
		content = strings.TrimLeftFunc(trimmed[end+len(close):], unicode.IsSpace)
	}
}

// repairArguments undoes the wrappings servers and small models put around
// a call's arguments object: "null" (a server's encoding of no arguments),
// a Markdown fence around the object, and the object encoded twice (a JSON
// string holding it). It returns the object's text and true when one was
// undone; anything else is left for objectArgs to judge, never guessed at:
// trailing text after the object (two calls run together, say) stays an
// error the model is told about.
func repairArguments(text string) (string, bool) {
	t := strings.TrimSpace(text)
	switch {
	case t == "null":
		return "{}", true
	case strings.HasPrefix(t, "```") && strings.HasSuffix(t, "```") && len(t) >= 6:
		inner := strings.TrimSuffix(t[3:], "```")
		if nl := strings.IndexByte(inner, '\n'); nl >= 0 && !strings.ContainsAny(inner[:nl], "{[\"") {
			inner = inner[nl+1:] // the fence's language tag
		}
		inner = strings.TrimSpace(inner)
		if isObject(inner) {
			return inner, true
		}
	case strings.HasPrefix(t, `"`):
		var s string
		if json.Unmarshal([]byte(t), &s) == nil && isObject(strings.TrimSpace(s)) {
			return strings.TrimSpace(s), true
		}
	}
	return text, false
}

// isObject reports whether s is exactly one JSON object.
func isObject(s string) bool {
	var m map[string]json.RawMessage
	return strings.HasPrefix(s, "{") && json.Unmarshal([]byte(s), &m) == nil
}

// resolveName maps a tool name as a model or server wrote it onto a tool
// the job offers for direct calls, when exactly one fits: surrounding
// space, a namespace ("functions.", "default_api." ...), Harmony's channel
// left after the name ("get_weather<|channel|>commentary"), the owning
// server's name before it ("files__read_file", "files.read_file",
// Claude Code's "mcp__files__read_file"), the server's own name of a tool
// offered server-qualified ("read_file" for "files__read_file"), another
// letter case or '-' for '_' ("get_sum" for "get-sum"). ok is false when the name is the job's already, or
// fits none or several: the unknown-tool error then tells the model the
// closest names.
func (r *registry) resolveName(name string) (string, bool) {
	return r.resolve(name, r.meta, r.byName)
}

// resolveCatalogName is resolveName for the catalog's tools alone (the
// name given to call_tool).
func (r *registry) resolveCatalogName(name string) (string, bool) {
	return r.resolve(name, r.byName)
}

// resolve is resolveName over the given name spaces, the first of which
// shadows the others.
func (r *registry) resolve(name string, spaces ...map[string]*entry) (string, bool) {
	has := func(n string) bool {
		for _, sp := range spaces {
			if _, ok := sp[n]; ok {
				return true
			}
		}
		return false
	}
	if has(name) {
		return name, false
	}
	n := strings.TrimSpace(name)
	if i := strings.Index(n, "<|"); i > 0 {
		n = strings.TrimSpace(n[:i])
	}
	for _, ns := range []string{"functions.", "function.", "tools.", "tool.", "default_api.", "functions:", "mcp__"} {
		n = strings.TrimPrefix(n, ns) // mcp__: Claude Code's mcp__SERVER__TOOL
	}
	if has(n) {
		return n, true
	}
	// server__tool, server.tool, server/tool, server:tool for a tool of
	// that server offered under its bare name.
	for _, sep := range []string{"__", ".", "/", ":"} {
		server, tool, ok := strings.Cut(n, sep)
		if !ok || server == "" {
			continue
		}
		if e, ok := r.byName[tool]; ok && e.tool.Server == server && has(tool) && (len(spaces) == 1 || r.meta[tool] == nil) {
			return tool, true
		}
	}
	// Another letter case, or '-' for '_' and back ("get_sum" for
	// "get-sum"), when it fits one tool; or the server's own name of a
	// tool the catalog offers server-qualified ("read_file" for
	// "files__read_file": the name its server's documentation uses).
	fold := strings.NewReplacer("-", "_")
	nf := fold.Replace(n)
	match := ""
	for _, sp := range spaces {
		for cand, e := range sp {
			if strings.EqualFold(fold.Replace(cand), nf) || (e.kind == kindMCP && strings.EqualFold(fold.Replace(e.tool.Original), nf)) {
				if match != "" && match != cand {
					return name, false // ambiguous
				}
				match = cand
			}
		}
	}
	return match, match != ""
}

// dropRepeatedCalls removes calls repeated in one reply under the same id
// with the same name and arguments (a server or proxy that emits a call
// twice): the model made one call, which must run once. origin is kept in
// step. Calls without an id, or whose arguments differ, all stay (fixCallIDs
// gives them ids of their own).
func dropRepeatedCalls(calls []llm.ToolCall, origin []string) ([]llm.ToolCall, []string) {
	seen := map[string]llm.ToolCall{}
	var keep []llm.ToolCall
	var keepFrom []string
	for i, c := range calls {
		if c.ID != "" {
			if prev, ok := seen[c.ID]; ok && prev.Function.Name == c.Function.Name &&
				string(compactJSON(json.RawMessage(prev.Function.Arguments))) == string(compactJSON(json.RawMessage(c.Function.Arguments))) {
				continue
			}
			if _, ok := seen[c.ID]; !ok {
				seen[c.ID] = c
			}
		}
		keep, keepFrom = append(keep, c), append(keepFrom, origin[i])
	}
	return keep, keepFrom
}
