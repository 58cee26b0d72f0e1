package agentloop

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jetagent/jetagent/internal/journal"
	"github.com/jetagent/jetagent/internal/llm"
)

// journaledTurn is a round's accepted answer as the journal keeps it: the
// message after call ids were fixed and content calls read, so a resumed
// attempt runs the same calls under the same ids, and the usage it cost.
type journaledTurn struct {
	Message llm.Message `json:"message"`
	Usage   Usage       `json:"usage"`
	// Mode is the job's resolved mode, so a resumed attempt offers the
	// same tools (the calls it replays were made with them).
	Mode Mode `json:"mode,omitempty"`
}

// journaledMode is the mode an earlier attempt ran in, if it journaled a
// round.
func journaledMode(jr *journal.Journal) Mode {
	if jr == nil {
		return ""
	}
	raw, ok := jr.Value(turnKey(1))
	if !ok {
		return ""
	}
	var jt journaledTurn
	if json.Unmarshal(raw, &jt) != nil {
		return ""
	}
	return jt.Mode
}

func turnKey(round int) string        { return fmt.Sprintf("t%d", round) }
func callKey(round, index int) string { return fmt.Sprintf("c%d.%d", round, index) }

// turn gets round's answer: the one an earlier attempt journaled, or the
// model's. An answer with calls is journaled, with the intents of the
// calls that start at once, before any of them runs: if it cannot be
// stored the attempt ends (journal.ErrUnavailable), since a call whose
// answer is not stored could later run again under another id.
func (j *job) turn(ctx context.Context, round int) (turn, error) {
	if j.in.Journal != nil {
		if raw, ok := j.in.Journal.Value(turnKey(round)); ok {
			var jt journaledTurn
			if err := json.Unmarshal(raw, &jt); err != nil {
				return turn{}, fmt.Errorf("agentloop: journaled answer of round %d: %w", round, err)
			}
			t := turn{msg: jt.Message}
			for i, tc := range jt.Message.ToolCalls {
				c := j.prepare(tc)
				c.key = callKey(round, i)
				t.calls = append(t.calls, c)
			}
			j.usage = addUsage(j.usage, jt.Usage, 1)
			return t, nil
		}
	}
	before := j.usage
	t, err := j.ask(ctx, round)
	if err != nil || j.in.Journal == nil {
		return t, err
	}
	if len(t.calls) == 0 {
		// The final answer is journaled too, so that an attempt killed
		// before the job's final state was stored (a long transcript
		// upload) does not pay for the last request again. Best effort:
		// nothing runs on it, and the answer is still this attempt's.
		if raw, err := json.Marshal(journaledTurn{Message: t.msg, Usage: addUsage(j.usage, before, -1), Mode: j.mode}); err == nil {
			_ = j.in.Journal.RecordValue(ctx, turnKey(round), raw, nil)
		}
		return t, nil
	}
	intents := map[string]journal.Call{}
	for i, c := range t.calls {
		c.key = callKey(round, i)
		// The calls that start at once (execute starts them in order).
		if jc, ok := j.journaled(c); ok && i < j.l.cfg.MaxParallelCalls {
			intents[c.key] = jc
		}
	}
	raw, err := json.Marshal(journaledTurn{Message: t.msg, Usage: addUsage(j.usage, before, -1), Mode: j.mode})
	if err != nil {
		return turn{}, fmt.Errorf("agentloop: journal answer of round %d: %w", round, err)
	}
	if err := j.in.Journal.RecordValue(ctx, turnKey(round), raw, intents); err != nil {
		return turn{}, err
	}
	return t, nil
}

// roundCompleted reports whether an earlier attempt completed round: the
// answer of the round after it is journaled (this attempt journals that
// only after the round's calls ran).
func (j *job) roundCompleted(round int) bool {
	if j.in.Journal == nil {
		return false
	}
	_, ok := j.in.Journal.Value(turnKey(round + 1))
	return ok
}

// journaledFinalAnswer is finalAnswer (rounds ran out), taken from the
// journal when an earlier attempt got it, and journaled (best effort)
// when not, like a round's final answer in turn.
func (j *job) journaledFinalAnswer(ctx context.Context, round int) (string, error) {
	if j.in.Journal == nil {
		return j.finalAnswer(ctx, round)
	}
	if raw, ok := j.in.Journal.Value(turnKey(round)); ok {
		var jt journaledTurn
		if err := json.Unmarshal(raw, &jt); err != nil {
			return "", fmt.Errorf("agentloop: journaled answer of round %d: %w", round, err)
		}
		j.usage = addUsage(j.usage, jt.Usage, 1)
		return jt.Message.Content, nil
	}
	before := j.usage
	answer, err := j.finalAnswer(ctx, round)
	if err != nil {
		return "", err
	}
	msg := llm.Message{Role: llm.RoleAssistant, Content: answer}
	if raw, err := json.Marshal(journaledTurn{Message: msg, Usage: addUsage(j.usage, before, -1), Mode: j.mode}); err == nil {
		_ = j.in.Journal.RecordValue(ctx, turnKey(round), raw, nil)
	}
	return answer, nil
}

// emitResumed says where an attempt that continues an earlier one starts.
func (j *job) emitResumed(ctx context.Context) {
	var st journal.Stats
	if j.in.Journal != nil {
		st = j.in.Journal.Prior()
	}
	if j.in.Resume == nil && st == (journal.Stats{}) {
		return
	}
	j.emit(ctx, EventJobResumed, j.rounds+1, map[string]any{
		"from_round":      j.rounds + 1,
		"rounds_done":     j.rounds,
		"answers":         st.Values,
		"calls_completed": st.Completed,
		"calls_in_flight": st.InFlight,
	})
}

// addUsage returns a + sign*b.
func addUsage(a, b Usage, sign int64) Usage {
	a.PromptTokens += sign * b.PromptTokens
	a.CompletionTokens += sign * b.CompletionTokens
	a.CachedPromptTokens += sign * b.CachedPromptTokens
	a.ToolDefTokens += sign * b.ToolDefTokens
	a.FullModeToolDefTokens += sign * b.FullModeToolDefTokens
	return a
}
