package llm

import (
	"fmt"
	"slices"
	"strings"
)

// CheckHistory reports the first way msgs (a job's history) is not a chat
// history that OpenAI-compatible servers take, naming the message by its
// index in msgs: a role other than system, developer, user, assistant and
// tool; a tool call without an id or a name; a tool result without a
// tool_call_id, or for no call of the assistant turn just before it (the
// turn's results come right after it, in any order, one per call); a
// call without its result there. OpenAI's API refuses each (400), after
// a job was taken and its first request sent (jobs refuses one at the door); a stored transcript, raw or reflected, passes. An id used again
// in a later turn (servers that send "call_0" every time) is taken: the
// loop gives new calls ids of their own.
func CheckHistory(msgs []Message) error {
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
		if m.Role == RoleTool {
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
		case RoleSystem, "developer", RoleUser, RoleAssistant: // developer: OpenAI's newer name for system
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
