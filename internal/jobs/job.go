package jobs

import (
	"encoding/json"
	"time"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/reflect"
)

// Job is what a submitter publishes on agent.jobs.<queue>
// (schemas/job.schema.json). Only Task is required.
//
// Servers selects MCP servers: nil (absent) means every configured
// server, an empty list none. It is omitzero, not omitempty: omitempty
// dropped the empty list, so a job meant to have no servers was published
// (by Client.Submit) without the field and got them all. The other lists
// and the map mean the same empty or absent (an empty allow list allows
// every tool, as an absent one does), so omitempty loses nothing there.
type Job struct {
	ID          string             `json:"id,omitempty"`
	Task        string             `json:"task"`
	System      string             `json:"system,omitempty"`
	Model       string             `json:"model,omitempty"`
	Queue       string             `json:"queue,omitempty"`
	ToolMode    string             `json:"tool_mode,omitempty"`
	Servers     []string           `json:"servers,omitzero"`
	Allow       []string           `json:"allow,omitempty"`
	Deny        []string           `json:"deny,omitempty"`
	MaxRounds   int                `json:"max_rounds,omitempty"`
	Timeout     string             `json:"timeout,omitempty"`
	ClientTools []clienttools.Decl `json:"client_tools,omitempty"`
	// ClientSecret authenticates client tool traffic (see package clienttools).
	ClientSecret string            `json:"client_secret,omitempty"`
	History      []llm.Message     `json:"history,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
}

// TimeoutDuration parses Timeout (0 when unset; the schema guarantees the
// syntax, so an error here means the job skipped validation).
func (j *Job) TimeoutDuration() (time.Duration, error) {
	if j.Timeout == "" {
		return 0, nil
	}
	return time.ParseDuration(j.Timeout)
}

// Status is where a job is in its life.
type Status string

// Statuses. Terminal ones never change again.
const (
	StatusQueued    Status = "queued"
	StatusRunning   Status = "running"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
	StatusDead      Status = "dead"
)

// known reports whether s is one of the statuses above.
func (s Status) known() bool {
	switch s {
	case StatusQueued, StatusRunning, StatusSucceeded, StatusFailed, StatusCancelled, StatusDead:
		return true
	}
	return false
}

// Terminal reports whether s is final.
func (s Status) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusCancelled, StatusDead:
		return true
	}
	return false
}

// Event types the worker publishes itself (the runner adds its own).
const (
	EventStarted   = "started"
	EventRetry     = "retry"
	EventRequeued  = "requeued"
	EventSucceeded = string(StatusSucceeded)
	EventFailed    = string(StatusFailed)
	EventCancelled = string(StatusCancelled)
	EventDead      = string(StatusDead)
)

// TerminalEvent reports whether an event type ends a job's event stream.
func TerminalEvent(typ string) bool { return Status(typ).Terminal() }

// State is the value of key <job_id> in the state bucket
// (schemas/state.schema.json).
type State struct {
	ID              string    `json:"id"`
	Queue           string    `json:"queue,omitempty"`
	Status          Status    `json:"status"`
	Attempt         int       `json:"attempt,omitempty"`
	Worker          string    `json:"worker,omitempty"`
	Error           string    `json:"error,omitempty"`
	CancelRequested bool      `json:"cancel_requested,omitempty"`
	Task            string    `json:"task,omitempty"`
	Result          *Result   `json:"result,omitempty"`
	StreamSeq       uint64    `json:"stream_seq,omitempty"`
	CreatedAt       time.Time `json:"created_at,omitzero"`
	StartedAt       time.Time `json:"started_at,omitzero"`
	FinishedAt      time.Time `json:"finished_at,omitzero"`
	UpdatedAt       time.Time `json:"updated_at"`
}

// Result is the outcome of a job (schemas/result.schema.json): the data of
// its terminal event, the result in its state and a line of submit --out.
type Result struct {
	ID         string           `json:"id"`
	Queue      string           `json:"queue,omitempty"`
	Status     Status           `json:"status"`
	Answer     string           `json:"answer,omitempty"`
	Error      string           `json:"error,omitempty"`
	Attempt    int              `json:"attempt,omitempty"`
	Worker     string           `json:"worker,omitempty"`
	Rounds     int              `json:"rounds,omitempty"`
	StopReason string           `json:"stop_reason,omitempty"`
	Mode       string           `json:"mode,omitempty"`
	Usage      *agentloop.Usage `json:"usage,omitempty"`
	DurationMS int64            `json:"duration_ms,omitempty"`
	Transcript string           `json:"transcript,omitempty"`
	// TranscriptError says why the transcripts could not be stored.
	TranscriptError string            `json:"transcript_error,omitempty"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	// AnswerRef and ErrorRef, when set, say Answer and Error are previews:
	// the full text was too large for the state and is stored in the
	// transcript bucket (see AnswerName; Client.FullResult reads it back).
	AnswerRef *DataRef `json:"answer_ref,omitempty"`
	ErrorRef  *DataRef `json:"error_ref,omitempty"`
}

// Event is one step of a job, published on agent.events.<job_id>.<type>
// (schemas/event.schema.json).
type Event struct {
	JobID   string          `json:"job_id"`
	Type    string          `json:"type"`
	Attempt int             `json:"attempt"`
	Seq     int             `json:"seq"`
	Round   int             `json:"round,omitempty"`
	Worker  string          `json:"worker,omitempty"`
	Time    time.Time       `json:"time"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Transcript is an object in the transcript store
// (schemas/transcript.schema.json).
type Transcript struct {
	JobID      string           `json:"job_id"`
	Reflected  bool             `json:"reflected"`
	Attempt    int              `json:"attempt,omitempty"`
	Worker     string           `json:"worker,omitempty"`
	Model      string           `json:"model,omitempty"`
	Mode       string           `json:"mode,omitempty"`
	Rounds     int              `json:"rounds"`
	StopReason string           `json:"stop_reason,omitempty"`
	Usage      agentloop.Usage  `json:"usage"`
	StartedAt  time.Time        `json:"started_at,omitzero"`
	FinishedAt time.Time        `json:"finished_at,omitzero"`
	DurationMS int64            `json:"duration_ms"`
	Messages   []llm.Message    `json:"messages"`
	Records    []reflect.Record `json:"records,omitempty"`
}

// Outcome is what a Runner returns for a finished job: the loop's result,
// its reflected transcript and the model that ran it.
type Outcome struct {
	agentloop.Result
	// Reflected is the transcript rewritten by reflect (indirect calls shown
	// as the real calls). Nil means the runner did not reflect: the stored
	// transcript is then the raw one, marked "reflected": false.
	Reflected []llm.Message
	Model     string
}
