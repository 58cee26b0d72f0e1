package agentloop

import (
	"context"
	"encoding/json"

	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/journal"
	"github.com/jetagent/jetagent/internal/llm"
)

// Input is one job as the loop sees it.
type Input struct {
	// JobID names the job in events (informational).
	JobID  string
	Task   string
	System string
	Model  string
	// Mode "" means the configured default.
	Mode Mode
	// MaxRounds 0 means the configured default; it is capped by MaxRoundsCap.
	MaxRounds int
	// History is earlier messages (a continuation); it goes between the
	// system prompt and the task. A stored transcript starts with the
	// earlier job's system prompt: when System is set, those leading system
	// messages are left out, so the model gets one system prompt. It must
	// be a chat history (llm.CheckHistory): Run refuses one that is not. A
	// call id another provider may refuse (over 40 characters, or other
	// than letters, digits, '_' and '-') is replaced, in the call and its
	// result, by one the loop makes up; a call's arguments that are not
	// one JSON object are {}, as in the loop's own turns (historyMessage).
	History []llm.Message
	// Tools is the job's view of the registry (nil: no MCP tools).
	Tools       ToolSet
	ClientTools []clienttools.Decl
	// ClientCaller runs a client-only tool (the submitter answers it).
	// Required when ClientTools is not empty.
	ClientCaller func(ctx context.Context, name string, args json.RawMessage) (string, error)
	// Sink receives every event (nil: events are dropped).
	Sink Sink
	// Checkpoints receives the state after each completed round (optional).
	Checkpoints CheckpointStore
	// Resume, when set, continues from a checkpoint instead of starting
	// from System/History/Task. Its messages must be a chat history
	// (llm.CheckHistory), as History must: Run refuses one that is not.
	Resume *Checkpoint
	// Journal, when set, journals the job's effects (tool and client-tool
	// calls) and each round's model answer, so that an attempt after a
	// crash neither repeats a completed call nor asks the model again for
	// a round whose calls began (internal/journal). Its idempotency keys
	// are JobID and the call id.
	Journal *journal.Journal
}
