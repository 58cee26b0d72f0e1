package reflect

import (
	"fmt"

	"github.com/jetagent/jetagent/internal/llm"
)

// Rewrite returns msgs with the recorded indirect invocations turned into
// ordinary tool calls under their real names. msgs and recs are not modified;
// untouched messages are copied as they are (shallow copies).
//
// Records are grouped by CallID, in slice order (the order the loop invoked
// them). A group applies when every record in it has its payload (non-empty
// Name and CallID, non-nil Output); a group with a record missing its payload
// is left entirely as the model saw it, so the reflected transcript never
// shows a partial picture of one model call.
//
// For an applying group, every assistant tool call whose id is the group's
// CallID is replaced, at its position, by one call per record (id = the
// record's effective id, see below; name = Record.Name; arguments =
// Record.Input), and every tool message answering that id is replaced, at its
// position, by one tool message per record carrying Record.Output verbatim.
//
//   - call_tool: one record; the meta call becomes the real call.
//   - execute_code: n records become n calls and n results in invocation
//     order. The code itself and its printed output are dropped: there is no
//     longer a call to attach them to, gluing them onto an inner result would
//     attribute text to a tool that never produced it, and the inner results
//     hold the tool facts the printout was derived from. The raw transcript
//     keeps both.
//   - client_tool: the model's call already names the real tool; the result
//     becomes the submitter's answer. With no recorded Input the model's
//     arguments are kept.
//
// A record's effective id is its ID, or its CallID when ID is empty and the
// record is alone in its group, or CallID_<n> (1-based) otherwise. With an
// empty Input the arguments are "{}" (client_tool: the model's arguments).
//
// Rewrite is idempotent: groups whose effective ids could be rewritten again
// (an id repeated across records, or equal to a CallID of any group unless it
// is the lone record's own CallID) are ignored, so a reflected call is never
// reflected twice. Ignore reports them.
func Rewrite(msgs []llm.Message, recs []Record) []llm.Message {
	p := plan(recs)
	if len(p.groups) == 0 {
		return append([]llm.Message(nil), msgs...)
	}
	out := make([]llm.Message, 0, len(msgs))
	for _, m := range msgs {
		switch {
		case m.Role == llm.RoleAssistant && p.touchesCalls(m.ToolCalls):
			out = append(out, p.rewriteCalls(m))
		case m.Role == llm.RoleTool && p.groups[m.ToolCallID] != nil:
			out = append(out, p.results(m.ToolCallID)...)
		default:
			out = append(out, m)
		}
	}
	return out
}

// Ignored is a record Rewrite leaves alone, with the reason.
type Ignored struct {
	Record Record
	Reason string
}

// Ignore reports the records Rewrite does not apply and why, so the loop can
// log them; the records themselves stay in the stored transcript.
func Ignore(recs []Record) []Ignored {
	return plan(recs).ignored
}

// group is the records of one model call, with their effective ids.
type group struct {
	recs []Record
	ids  []string
}

type rewritePlan struct {
	groups  map[string]*group // by CallID; only groups that apply
	ignored []Ignored
}

func plan(recs []Record) rewritePlan {
	byCall := map[string]*group{}
	var order []string
	for _, r := range recs {
		g := byCall[r.CallID]
		if g == nil {
			g = &group{}
			byCall[r.CallID] = g
			order = append(order, r.CallID)
		}
		g.recs = append(g.recs, r)
	}
	p := rewritePlan{groups: map[string]*group{}}
	ignore := func(g *group, why string) {
		for _, r := range g.recs {
			p.ignored = append(p.ignored, Ignored{Record: r, Reason: why})
		}
	}
	// Complete groups, with effective ids; and every id each one claims.
	var complete []string
	idUse := map[string]int{}
	for _, cid := range order {
		g := byCall[cid]
		if why := missing(cid, g.recs); why != "" {
			ignore(g, why)
			continue
		}
		g.ids = make([]string, len(g.recs))
		for i, r := range g.recs {
			switch {
			case r.ID != "":
				g.ids[i] = r.ID
			case len(g.recs) == 1:
				g.ids[i] = cid
			default:
				g.ids[i] = fmt.Sprintf("%s_%d", cid, i+1)
			}
			idUse[g.ids[i]]++
		}
		complete = append(complete, cid)
	}
	// Reject groups whose ids collide; checked against all complete groups
	// so that dropping one group can never make another invalid.
	for _, cid := range complete {
		g := byCall[cid]
		why := ""
		for _, id := range g.ids {
			if idUse[id] > 1 {
				why = fmt.Sprintf("id %q used by more than one record", id)
				break
			}
			if byCall[id] != nil && byCall[id].ids != nil && (id != cid || len(g.recs) != 1) {
				why = fmt.Sprintf("id %q is also the call id of a recorded call", id)
				break
			}
		}
		if why != "" {
			ignore(g, why)
			continue
		}
		p.groups[cid] = g
	}
	return p
}

// missing tells why a group cannot apply ("" when it can).
func missing(callID string, recs []Record) string {
	if callID == "" {
		return "no call id"
	}
	for _, r := range recs {
		switch {
		case r.Name == "":
			return "a record of this call has no name"
		case r.Output == nil:
			return "a record of this call has no output"
		}
	}
	return ""
}

func (p rewritePlan) touchesCalls(calls []llm.ToolCall) bool {
	for _, c := range calls {
		if p.groups[c.ID] != nil {
			return true
		}
	}
	return false
}

func (p rewritePlan) rewriteCalls(m llm.Message) llm.Message {
	calls := make([]llm.ToolCall, 0, len(m.ToolCalls))
	for _, c := range m.ToolCalls {
		g := p.groups[c.ID]
		if g == nil {
			calls = append(calls, c)
			continue
		}
		for i, r := range g.recs {
			args := string(r.Input)
			if len(r.Input) == 0 {
				args = "{}"
				if r.Kind == KindClientTool {
					args = c.Function.Arguments
				}
			}
			calls = append(calls, llm.ToolCall{
				ID:       g.ids[i],
				Type:     "function",
				Function: llm.FunctionCall{Name: r.Name, Arguments: args},
			})
		}
	}
	m.ToolCalls = calls
	return m
}

func (p rewritePlan) results(callID string) []llm.Message {
	g := p.groups[callID]
	out := make([]llm.Message, len(g.recs))
	for i, r := range g.recs {
		out[i] = llm.Message{
			Role:       llm.RoleTool,
			Content:    *r.Output,
			ToolCallID: g.ids[i],
			Name:       r.Name,
		}
	}
	return out
}
