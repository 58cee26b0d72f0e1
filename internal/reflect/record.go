package reflect

import "encoding/json"

// Kinds of indirect invocation.
const (
	KindCallTool   = "call_tool"    // dispatched through the call_tool meta tool
	KindCode       = "execute_code" // called from inside execute_code
	KindClientTool = "client_tool"  // answered by the submitter
)

// Record is one indirect tool invocation, captured by the agent loop while it
// runs, so that the stored transcript can show the real call.
type Record struct {
	// ID is the stable id of the real call in the rewritten transcript.
	ID string `json:"id"`
	// CallID is the tool_call id of the model's call that caused this one
	// (the call_tool / execute_code / client tool call).
	CallID string `json:"call_id"`
	Kind   string `json:"kind"`
	// Name is the real tool name (as the model would call it directly).
	Name   string          `json:"name"`
	Input  json.RawMessage `json:"input,omitempty"`
	Output *string         `json:"output,omitempty"`
	// IsError tells whether Output is an error message.
	IsError bool `json:"is_error,omitempty"`
}
