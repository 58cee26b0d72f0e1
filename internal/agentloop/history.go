package agentloop

import (
	"errors"
	"regexp"
	"slices"
	"strings"

	"github.com/jetagent/jetagent/internal/llm"
)

// portableID is a tool call id every provider takes back: OpenAI's limit
// is 40 characters; Anthropic's pattern (also behind proxies) letters,
// digits, '_' and '-'.
var portableID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`)

// portableHistory returns msgs (a checked history) with each call id that
// is not portableID replaced by one the loop makes up (callID, used
// nowhere in msgs), in the call and in its result alike: a continuation's
// history may come from another provider, whose ids this one refuses
// (OpenAI: "Invalid 'messages[2].tool_calls[0].id': string too long").
// msgs is not modified; it is returned as it is when every id is portable.
func portableHistory(msgs []llm.Message) []llm.Message {
	out, _ := replaceCallIDs(msgs, portableID.MatchString)
	return out
}

// mistralID is the only tool call id Mistral's API and its chat format
// (mistral_common, also behind vLLM, LiteLLM and mlx servers) take: 9
// letters or digits.
var mistralID = regexp.MustCompile(`^[A-Za-z0-9]{9}$`)

// mistralIDsRefused reports whether err is the refusal of a request
// holding a call id that is not mistralID: "Tool call id was
// call_PTLP8xhu3uwZk4l3nlnrrJha but must be a-z, A-Z, 0-9, with a length
// of 9." A continuation's history from another provider has such ids, and
// so do proxies that make up their own (LiteLLM's, omlx's) and then send
// them back to Mistral.
func mistralIDsRefused(err error) bool {
	var apiErr *llm.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	m := strings.ToLower(apiErr.Message)
	return strings.Contains(m, "tool call id") && strings.Contains(m, "length of 9")
}

// mistralIDs returns msgs with every call id that is not mistralID
// replaced as portableHistory replaces ids (ok false when there is none).
func mistralIDs(msgs []llm.Message) ([]llm.Message, bool) {
	return replaceCallIDs(msgs, mistralID.MatchString)
}

// replaceCallIDs returns msgs with each call id that keep refuses replaced
// by one the loop makes up (callID, used nowhere in msgs), in the call and
// in its results alike; replaced is false, and msgs returned as it is,
// when keep takes every id. msgs is not modified.
func replaceCallIDs(msgs []llm.Message, keep func(string) bool) (_ []llm.Message, replaced bool) {
	used := map[string]bool{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			used[c.ID] = true
		}
		used[m.ToolCallID] = true
	}
	var (
		out  []llm.Message
		turn map[string][]string // the turn's replaced ids: their new ones, in call order
		k    int
	)
	edit := func(i int) *llm.Message {
		if out == nil {
			out = slices.Clone(msgs)
		}
		return &out[i]
	}
	for i, m := range msgs {
		if m.Role == llm.RoleTool {
			if ids := turn[m.ToolCallID]; len(ids) > 0 {
				edit(i).ToolCallID, turn[m.ToolCallID] = ids[0], ids[1:]
			}
			continue
		}
		turn = nil
		cloned := false
		for ci, c := range m.ToolCalls {
			if keep(c.ID) {
				continue
			}
			for used[callID(k)] {
				k++
			}
			id := callID(k)
			used[id] = true
			if turn == nil {
				turn = map[string][]string{}
			}
			turn[c.ID] = append(turn[c.ID], id)
			e := edit(i)
			if !cloned {
				e.ToolCalls, cloned = slices.Clone(m.ToolCalls), true
			}
			e.ToolCalls[ci].ID = id
		}
	}
	if out == nil {
		return msgs, false
	}
	return out, true
}

// sendableArguments returns msgs with {} for the arguments of each call
// that are not one JSON object, as history keeps the loop's own calls
// (historyMessage): a history from another system may hold "" for a call
// without parameters, or a cut-off call, and Ollama, vLLM and llama.cpp
// refuse the whole request then (400 "invalid tool call arguments").
// msgs is not modified.
func sendableArguments(msgs []llm.Message) []llm.Message {
	var out []llm.Message
	for i, m := range msgs {
		if slices.ContainsFunc(m.ToolCalls, func(c llm.ToolCall) bool { return !isObject(strings.TrimSpace(c.Function.Arguments)) }) {
			if out == nil {
				out = slices.Clone(msgs)
			}
			out[i] = historyMessage(m) // clones the calls it changes
		}
	}
	if out == nil {
		return msgs
	}
	return out
}
