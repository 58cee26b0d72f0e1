package agentloop

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/jetagent/jetagent/internal/llm"
)

// CheckHistory reports the first way msgs (a job's history) is not a chat
// history that OpenAI-compatible servers take, naming the message by its
// index in msgs: a role other than system, developer, user, assistant and
// tool; a tool call without an id or a name; a tool result without a
// tool_call_id, or for no call of the assistant turn just before it (the
// turn's results come right after it, in any order, one per call); a
// call without its result there. OpenAI's API refuses each (400), after
// the job was taken and its first request sent; a stored transcript, raw or reflected, passes. An id used again
// in a later turn (servers that send "call_0" every time) is taken: the
// loop gives new calls ids of their own.
func CheckHistory(msgs []llm.Message) error {
	type pending struct {
		id, name string
	}
	var (
		open  []pending // the calls of the last turn not answered yet
		turn  int       // that turn's index
		calls = map[string]bool{}
	)
	unanswered := func() error {
		if len(open) == 0 {
			return nil
		}
		return fmt.Errorf("history[%d]: call %q (%s) has no tool result after it", turn, open[0].id, open[0].name)
	}
	for i, m := range msgs {
		if m.Role == llm.RoleTool {
			if m.ToolCallID == "" {
				return fmt.Errorf("history[%d]: a tool result without a tool_call_id", i)
			}
			k := slices.IndexFunc(open, func(p pending) bool { return p.id == m.ToolCallID })
			if k < 0 {
				err := fmt.Errorf("history[%d]: a tool result for call %q, which no assistant message just before it made", i, m.ToolCallID)
				if _, made := calls[m.ToolCallID]; made {
					err = fmt.Errorf("%w (or it was answered already)", err)
				}
				return err
			}
			open = slices.Delete(open, k, k+1)
			continue
		}
		if err := unanswered(); err != nil {
			return err
		}
		switch m.Role {
		case llm.RoleSystem, "developer", llm.RoleUser, llm.RoleAssistant: // developer: OpenAI's newer name for system
		default:
			return fmt.Errorf("history[%d]: role %q is not system, developer, user, assistant or tool", i, m.Role)
		}
		turn = i
		for k, c := range m.ToolCalls {
			switch {
			case c.ID == "":
				return fmt.Errorf("history[%d]: call %d (%s) has no id", i, k, c.Function.Name)
			case strings.TrimSpace(c.Function.Name) == "":
				return fmt.Errorf("history[%d]: call %q names no tool", i, c.ID)
			}
			calls[c.ID] = true
			open = append(open, pending{c.ID, c.Function.Name})
		}
	}
	return unanswered()
}

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
