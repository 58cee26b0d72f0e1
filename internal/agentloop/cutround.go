package agentloop

import (
	"context"
	"errors"
	"slices"

	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/reflect"
)

// cutNote is the result, in the transcripts, of a call the job's end cut
// short: what stopped the job, and whether the call can have run.
func cutNote(ctx context.Context, c *call) string {
	why := "was cancelled"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		why = "timed out"
	}
	if c.round == 0 { // execute never started it
		return "Error: the job " + why + " before this call started: it did not run"
	}
	return "Error: the job " + why + " while this call ran: it did not finish, and may or may not have taken effect (check before calling it again)"
}

// cutRound is the tool messages of a round the job's context ended in:
// a call that finished keeps its result, the others get cutNote.
func cutRound(ctx context.Context, calls []*call, msgs []llm.Message) []llm.Message {
	out := append([]llm.Message(nil), msgs...)
	for i, c := range calls {
		if !c.ran {
			out[i].Content = cutNote(ctx, c)
		}
	}
	return out
}

// cutRecords is the reflection records of such a round, a call that did
// not finish with its cutNote as output. So is an inner call of a script
// that the context's end cut short: the reflected transcript shows it in
// place of the execute_code call (and its cutNote), and its own error
// ("context canceled") read as a call that failed, to be made again.
func cutRecords(ctx context.Context, calls []*call) []reflect.Record {
	var recs []reflect.Record
	for _, c := range calls {
		if c.record != nil {
			r := *c.record
			if !c.ran {
				note := cutNote(ctx, c)
				r.Output, r.IsError = &note, true
			}
			recs = append(recs, r)
		}
		for i, r := range c.records { // execute_code's inner calls
			if !c.ran && slices.Contains(c.cutInner, i) {
				note := cutNote(ctx, c)
				r.Output, r.IsError = &note, true
			}
			recs = append(recs, r)
		}
	}
	return recs
}
