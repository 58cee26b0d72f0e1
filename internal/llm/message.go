package llm

import "encoding/json"

// Roles of chat-completions messages.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one OpenAI chat-completions message. It is the unit of history,
// checkpoints and transcripts, so its JSON form is the provider's wire form.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// Name is the tool name on role "tool" messages (informational; providers
	// ignore it, but it makes transcripts readable).
	Name string `json:"name,omitempty"`
	// The reasoning a server returned beside an assistant message, each
	// JSON value as it came, and sent back with the message: thinking-mode
	// servers refuse a request whose tool-call turn lacks it (DeepSeek,
	// Kimi and GLM: 400 "reasoning_content ... must be passed back").
	// reasoning_content is DeepSeek's, Kimi's, GLM's, vLLM's and
	// llama.cpp's name; reasoning and reasoning_details OpenRouter's
	// (reasoning also Ollama's and newer vLLM's).
	ReasoningContent json.RawMessage `json:"reasoning_content,omitempty"`
	Reasoning        json.RawMessage `json:"reasoning,omitempty"`
	ReasoningDetails json.RawMessage `json:"reasoning_details,omitempty"`
}

// ToolCall is an assistant's request to run one function.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // always "function"
	Function FunctionCall `json:"function"`
	// ExtraContent is the call's provider data, as it came, sent back with
	// the call: Gemini's {"google": {"thought_signature": ...}}, without
	// which Gemini 3 refuses the next request ("Function call is missing a
	// thought_signature").
	ExtraContent json.RawMessage `json:"extra_content,omitempty"`
}

// FunctionCall names the function and carries its arguments as the JSON text
// the model wrote (which may be invalid JSON: callers must check).
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a function definition offered to the model.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Usage is what the provider reported for one or more requests.
type Usage struct {
	PromptTokens       int64 `json:"prompt_tokens"`
	CompletionTokens   int64 `json:"completion_tokens"`
	CachedPromptTokens int64 `json:"cached_prompt_tokens,omitempty"`
}

// Add accumulates u2 into u.
func (u *Usage) Add(u2 Usage) {
	u.PromptTokens += u2.PromptTokens
	u.CompletionTokens += u2.CompletionTokens
	u.CachedPromptTokens += u2.CachedPromptTokens
}

// Request is one chat-completions call.
type Request struct {
	Model    string    `json:"model,omitempty"`
	Messages []Message `json:"messages"`
	Tools    []Tool    `json:"tools,omitempty"`
	// ToolChoice is "", "auto", "none" or "required"; any other value is
	// the name of a tool the model must call.
	ToolChoice string `json:"tool_choice,omitempty"`
}

// Response is a chat-completions reply: its one choice, or the merge of
// the choices a server split one reply into (GitHub Copilot's API sends
// the text and the tool calls as two choices).
type Response struct {
	Message      Message `json:"message"`
	FinishReason string  `json:"finish_reason"`
	// Refusal is the provider's refusal text, when it declined to answer.
	Refusal string `json:"refusal,omitempty"`
	// Error is the error a choice carried (OpenRouter's choices[].error,
	// {"code", "message"}, beside finish_reason "error" when the upstream
	// failed mid-generation): its code and message, "" for none.
	Error string `json:"error,omitempty"`
	Usage Usage  `json:"usage"`
	Model string `json:"model,omitempty"`
}
