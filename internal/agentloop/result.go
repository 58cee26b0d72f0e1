package agentloop

import (
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/reflect"
)

// Why the loop stopped (Result.StopReason).
const (
	StopFinalAnswer = "final_answer"
	StopMaxRounds   = "max_rounds"
	StopTimeout     = "timeout"
	StopCancelled   = "cancelled"
	StopError       = "error"
)

// Usage is a job's token accounting.
type Usage struct {
	// llm.Usage is what the provider reported, summed over every request
	// (ephemeral retries included: they were paid for).
	llm.Usage
	// ToolDefTokens is the o200k_base token count of the tools arrays
	// actually sent, summed over requests.
	ToolDefTokens int64 `json:"tool_def_tokens"`
	// FullModeToolDefTokens is what full mode would have sent for the same
	// requests: the baseline the other modes are measured against.
	FullModeToolDefTokens int64 `json:"full_mode_tool_def_tokens"`
}

// Result is the outcome of a job, returned even when Run fails.
type Result struct {
	Answer string `json:"answer"`
	// Messages is the raw transcript: exactly what the model saw (failed
	// ephemeral attempts excluded), ending with the final answer.
	Messages []llm.Message `json:"messages"`
	// Records are the indirect invocations, for reflect.
	Records    []reflect.Record `json:"records,omitempty"`
	Usage      Usage            `json:"usage"`
	Rounds     int              `json:"rounds"`
	StopReason string           `json:"stop_reason"`
	// Mode is the mode used (auto resolved).
	Mode Mode `json:"mode"`
}
