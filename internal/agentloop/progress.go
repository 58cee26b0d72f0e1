package agentloop

import (
	"context"
	"sync/atomic"

	"github.com/jetagent/jetagent/internal/toolcache"
)

// maxProgressEvents bounds the tool.progress events of one call: a
// server reporting every byte of a download must not flood the job's
// events. Reports beyond it are dropped; the tool.result still comes.
const maxProgressEvents = 100

// withProgress asks the tool call ctx carries to report progress, each
// report published as a tool.progress event of the call (data: call_id,
// name, tool, progress, total when known, message when given, and
// extra's keys). A later withProgress, an inner call of a script, wins.
func withProgress(ctx context.Context, round int, emit func(context.Context, string, int, map[string]any), callID, name, tool string, extra map[string]any) context.Context {
	var n atomic.Int64
	return toolcache.WithProgress(ctx, func(p toolcache.Progress) {
		if n.Add(1) > maxProgressEvents {
			return
		}
		data := map[string]any{"call_id": callID, "name": name, "tool": tool, "progress": p.Progress}
		if p.Total > 0 {
			data["total"] = p.Total
		}
		if p.Message != "" {
			data["message"] = p.Message
		}
		for k, v := range extra {
			data[k] = v
		}
		emit(ctx, EventToolProgress, round, data)
	})
}
