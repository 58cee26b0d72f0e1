package agentloop

import (
	"regexp"
	"slices"

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
			if portableID.MatchString(c.ID) {
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
		return msgs
	}
	return out
}
