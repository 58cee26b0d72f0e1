package agentloop

import "context"

// Event types.
const (
	EventLLMRequest           = "llm.request"
	EventLLMResponse          = "llm.response"
	EventToolCall             = "tool.call"
	EventToolResult           = "tool.result"
	EventToolValidationFailed = "tool.validation_failed"
	EventToolSchemaRetry      = "tool.schema_retry"
	EventToolClash            = "tool.clash"
	EventCheckpointFailed     = "checkpoint.failed"
	EventLoopOutcome          = "loop.outcome"
)

// Event is one step of a job. Data holds JSON-friendly values only.
type Event struct {
	Type  string         `json:"type"`
	Round int            `json:"round"`
	Data  map[string]any `json:"data,omitempty"`
}

// Sink receives a job's events in order. Emit is called from the loop's
// goroutine and from tool goroutines, so implementations must be safe for
// concurrent use; it must not block for long (the loop waits for it).
type Sink interface {
	Emit(ctx context.Context, e Event)
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(ctx context.Context, e Event)

// Emit calls f.
func (f SinkFunc) Emit(ctx context.Context, e Event) { f(ctx, e) }

type nopSink struct{}

func (nopSink) Emit(context.Context, Event) {}
