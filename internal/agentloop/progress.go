package agentloop

import (
	"context"
	"math"
	"sync/atomic"

	"github.com/jetagent/jetagent/internal/toolcache"
)

// maxProgressEvents bounds the tool.progress events of one call: a
// server reporting every byte of a download must not flood the job's
// events. Reports beyond it are dropped; the tool.result still comes.
const maxProgressEvents = 100

// maxProgressMessage bounds a report's message in its event: a status
// line, which a server could make megabytes long, each of up to 100
// events then too large for NATS (stored as an object, on the session's
// reading goroutine).
const maxProgressMessage = 1 << 10

// withProgress asks the tool call ctx carries to report progress, each
// report published as a tool.progress event of the call (data: call_id,
// name, tool, progress when finite, total when known, message when given,
// cut to maxProgressMessage, and extra's keys). A later withProgress, an inner call of a script, wins.
func withProgress(ctx context.Context, round int, emit func(context.Context, string, int, map[string]any), callID, name, tool string, extra map[string]any) context.Context {
	var n atomic.Int64
	return toolcache.WithProgress(ctx, func(p toolcache.Progress) {
		if n.Add(1) > maxProgressEvents {
			return
		}
		data := map[string]any{"call_id": callID, "name": name, "tool": tool}
		// A number JSON cannot hold (NaN, an infinity: a Go server in
		// process) made the event impossible to encode, so it was lost;
		// it is left out, the rest of the report kept.
		if finite(p.Progress) {
			data["progress"] = p.Progress
		}
		if p.Total > 0 && finite(p.Total) {
			data["total"] = p.Total
		}
		if p.Message != "" {
			data["message"] = cutText(p.Message, maxProgressMessage)
		}
		for k, v := range extra {
			data[k] = v
		}
		emit(ctx, EventToolProgress, round, data)
	})
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
