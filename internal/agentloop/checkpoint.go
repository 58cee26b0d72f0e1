package agentloop

import (
	"context"

	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/reflect"
)

// Checkpoint is the loop's progress after a completed round: enough to continue
// the job without asking the model again for rounds already done.
type Checkpoint struct {
	Messages []llm.Message    `json:"messages"`
	Round    int              `json:"round"` // rounds completed
	Records  []reflect.Record `json:"records,omitempty"`
	Usage    Usage            `json:"usage"`
	// Mode is the resolved mode, so a resumed job keeps its tools array.
	Mode Mode `json:"mode,omitempty"`
}

// CheckpointStore persists checkpoints. A failed Save is reported as a
// checkpoint.failed event and the job goes on: losing a checkpoint costs a
// re-run of rounds, failing the job would cost all of them.
type CheckpointStore interface {
	Save(ctx context.Context, c Checkpoint) error
}
