package agentloop

import "context"

// Event types, with the keys of their Data:
//
//	llm.request            retry, message_count, tool_count, tool_def_tokens, mode
//	llm.response           retry, finish_reason, prompt_tokens, completion_tokens,
//	                       cached_prompt_tokens, tool_calls, content_bytes
//	tool.call              call_id, name, arguments (the text the model wrote)
//	tool.result            call_id, name, tool (real tool behind call_tool), duration_ms,
//	                       size (bytes of the full output), error, truncated_for_model,
//	                       output (full), journal ("resent": an interrupted read-only or
//	                       idempotent call sent again; "interrupted"; absent when the call
//	                       just ran). A call an earlier attempt completed is replayed from
//	                       the journal without events (they were published then).
//	tool.progress          call_id, name, tool, progress (a number JSON holds), total
//	                       (when the server knows it), message (when it says one, at
//	                       most 1 KiB): the server's report on a call in progress (MCP
//	                       notifications/progress; the loop asks for them), before its
//	                       tool.result; at most 100 a call
//	tool.validation_failed retry, call_id, name, tool, arguments, errors ([]string)
//	tool.schema_retry      retry, tools ([]string), tool_def_tokens
//	tool.clash             name, server, winner
//	content_call.recovered retry, calls ([]{call_id, name, arguments, shape}): tool calls
//	                       read from the reply's content (shape: markup for the
//	                       well-formed shapes, else what the tolerant reader repaired)
//	content_call.reask     retry, reason, content (the reply, at most 2 KiB), final
//	                       (the tool-less last request): an answer that looked like a
//	                       failed call was asked again, ephemerally
//	tool.interrupted       call_id, name, tool, idempotency_key: an earlier attempt sent
//	                       the call and stopped before it returned; the tool is not
//	                       read-only or idempotent, so it was not sent again and the
//	                       model was told its effect is unknown
//	job.resumed            from_round (the round this attempt starts at), rounds_done,
//	                       answers, calls_completed, calls_in_flight (what the journal
//	                       held): an attempt continues an earlier one
//	context.compacted      retry, level, cut_outputs, cut_bytes, error (the server's
//	                       refusal): a request over the model's context window is
//	                       sent again, and so is every later one, with the tool
//	                       outputs the model already read cut (levels 1-3, compact.go)
//	checkpoint.failed      error
//	search.semantic_fallback error: search_tools' query could not be embedded (the
//	                       embeddings endpoint failed), so it was answered with the
//	                       BM25F ranking alone
//	loop.outcome           stop_reason, rounds, mode, prompt_tokens, completion_tokens,
//	                       cached_prompt_tokens, tool_def_tokens, full_mode_tool_def_tokens, error
//
// retry counts the requests of a round from 0 (schema retries and nudges
// are retry > 0). Round is the 1-based round; loop.outcome carries the
// number of completed rounds.
//
// A round's calls run concurrently (Config.MaxParallelCalls): their
// tool.call events come in the order the model gave the calls, each as
// its call starts; their tool.result events come as the calls finish, so
// a quicker later call's result may come first: match results to calls by
// call_id. The transcript and the tool messages keep the model's order.
const (
	EventLLMRequest           = "llm.request"
	EventLLMResponse          = "llm.response"
	EventToolCall             = "tool.call"
	EventToolResult           = "tool.result"
	EventToolProgress         = "tool.progress"
	EventContextCompacted     = "context.compacted"
	EventToolValidationFailed = "tool.validation_failed"
	EventToolSchemaRetry      = "tool.schema_retry"
	EventToolClash            = "tool.clash"
	EventContentCallRecovered = "content_call.recovered"
	EventContentCallReask     = "content_call.reask"
	EventToolInterrupted      = "tool.interrupted"
	EventJobResumed           = "job.resumed"
	EventCheckpointFailed     = "checkpoint.failed"
	EventLoopOutcome          = "loop.outcome"
)

// EventSearchSemanticFallback: search_tools answered with BM25F alone (see
// above).
const EventSearchSemanticFallback = "search.semantic_fallback"

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
