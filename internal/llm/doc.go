// Package llm is jetagent's thin client for OpenAI-compatible
// chat-completions endpoints (OpenAI, vLLM, Ollama, LM Studio, OpenRouter...).
//
// The shared wire types (Message, ToolCall, Tool, Request, Response, Usage)
// are the provider's JSON shape, so history, checkpoints and transcripts
// store exactly what was sent. [Client] maps them onto openai-go v3 and back,
// sending tool parameter schemas verbatim (never re-encoded through a map, so
// the tools array is byte-stable across requests, which prompt caches need).
//
// Retries are openai-go's own (option.WithMaxRetries, WithMaxRetryDelay):
// 429, 408/409, 5xx (x-should-retry overrides the status either way),
// connection errors and attempts that outlive Config.Timeout are retried
// with the SDK's exponential backoff, and a provider's Retry-After (seconds
// or RFC 1123 date), retry-after-ms, or a Google error body's RetryInfo
// retryDelay (Gemini sends no header) replaces the backoff for that wait, up to
// Config.MaxRetryDelay (a longer one ends the retries). A middleware sees
// each attempt: it applies Config.Timeout to that attempt alone, turns the
// outcome into this package's errors and reports retries to Config.OnRetry.
// Any other API error is returned at once as an [*APIError] carrying the
// provider's message; errors.Is(err, ErrNonRetryable) tells the caller that
// retrying the job would not help. An attempt that outlives Config.Timeout
// fails with ErrTimeout, which is kept distinct from the caller's own
// deadline. Cancelling the context stops a request or a backoff wait
// immediately. [ToolJSON] is the exact JSON a tool is sent as, for token
// counting that matches the wire.
//
// A 2xx reply is checked before openai-go decodes it. An error object in
// its body (proxies relay upstream failures so) is an [*APIError] with
// InReply set, and the status its code names goes to openai-go, which
// retries a relayed 429 or 5xx as it would the real one. An empty body,
// HTML or text, an event stream, JSON that is not a completion, or a body
// beyond Config.MaxReplyBytes fails at once with [ErrBadReply], which
// quotes the start of the body. Content sent as an array of parts is read
// as its text parts, a legacy function_call as a tool call, and the error
// a choice carries (OpenRouter's, when the upstream failed) as
// Response.Error. A
// message's reasoning_content, reasoning and reasoning_details, and a
// call's extra_content, are kept as they came and sent back with them.
//
// The environment is never read here (openai-go's OPENAI_* defaults are
// bypassed): the caller passes everything in [Config].
//
// Package llmtest provides the scripted server tests and the demo run against.
package llm
