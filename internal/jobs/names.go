package jobs

import (
	"fmt"
	"regexp"
	"strings"
)

// DefaultPrefix is the subject prefix of the wire contract.
const DefaultPrefix = "agent"

// DefaultQueue is the queue of jobs that name none.
const DefaultQueue = "default"

var (
	tokenRE  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
	queueRE  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	prefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)
)

// ValidID reports whether id can be a job id: a safe NATS subject token,
// KV key and object name.
func ValidID(id string) bool { return tokenRE.MatchString(id) }

// ValidQueue reports whether q can name a queue.
func ValidQueue(q string) bool { return queueRE.MatchString(q) }

// Names derives every subject, stream, bucket and consumer name from one
// prefix, so two deployments can share a NATS account. The zero value uses
// DefaultPrefix.
type Names struct {
	Prefix string
}

// NewNames validates prefix ("" means DefaultPrefix).
func NewNames(prefix string) (Names, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if !prefixRE.MatchString(prefix) {
		return Names{}, fmt.Errorf("%w: prefix %q must match %s", ErrConfig, prefix, prefixRE)
	}
	return Names{Prefix: prefix}, nil
}

func (n Names) p() string {
	if n.Prefix == "" {
		return DefaultPrefix
	}
	return n.Prefix
}

func (n Names) upper() string { return strings.ToUpper(strings.ReplaceAll(n.p(), "-", "_")) }

// JobsStream is the WorkQueue stream of jobs (AGENT_JOBS).
func (n Names) JobsStream() string { return n.upper() + "_JOBS" }

// JobsSubject is the subject jobs for queue are published on.
func (n Names) JobsSubject(queue string) string { return n.p() + ".jobs." + queue }

// EventsStream is the stream of job events (AGENT_EVENTS).
func (n Names) EventsStream() string { return n.upper() + "_EVENTS" }

// EventSubject is the subject of one event of a job.
func (n Names) EventSubject(jobID, typ string) string { return n.p() + ".events." + jobID + "." + typ }

// allEvents is the events stream's subject: every event of every job.
func (n Names) allEvents() string { return n.p() + ".events.>" }

// EventsFilter matches every event of a job.
func (n Names) EventsFilter(jobID string) string { return n.p() + ".events." + jobID + ".>" }

// DLQStream is the dead-letter stream (AGENT_DLQ).
func (n Names) DLQStream() string { return n.upper() + "_DLQ" }

// DLQSubject is where dead letters of queue go.
func (n Names) DLQSubject(queue string) string { return n.p() + ".dlq." + queue }

// StateBucket is the KV bucket of job states (AGENT_STATE).
func (n Names) StateBucket() string { return n.upper() + "_STATE" }

// TranscriptBucket is the object store of transcripts and checkpoints
// (AGENT_TRANSCRIPTS).
func (n Names) TranscriptBucket() string { return n.upper() + "_TRANSCRIPTS" }

// JournalBucket is the KV bucket of call journals and small checkpoints
// (AGENT_JOURNAL): keys <job_id>.j.<entry> and <job_id>.cp, purged when
// the job has its final state.
func (n Names) JournalBucket() string { return n.upper() + "_JOURNAL" }

// AdvisoryStream keeps the server's max-deliveries advisories for the jobs
// stream, so a dead letter is not lost when no worker is listening at the
// moment the advisory is sent.
func (n Names) AdvisoryStream() string { return n.upper() + "_ADVISORIES" }

// AdvisorySubject is the server's max-deliveries advisory subject for every
// consumer of the jobs stream.
func (n Names) AdvisorySubject() string {
	return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + n.JobsStream() + ".*"
}

// Consumer is the durable pull consumer shared by every worker of queue.
func (n Names) Consumer(queue string) string { return "workers-" + queue }

// AdvisoryConsumer is the durable consumer of AdvisoryStream shared by workers.
func (n Names) AdvisoryConsumer() string { return "dead-letterer" }

// CancelSubject is the core NATS subject a cancel request for a job is sent on.
func (n Names) CancelSubject(jobID string) string { return n.p() + ".cancel." + jobID }

// CancelWildcard matches every cancel request.
func (n Names) CancelWildcard() string { return n.p() + ".cancel.*" }

// AliveSubject is where a delivery of a job asks the attempt running it
// whether it is alive (see fence.go).
func (n Names) AliveSubject(jobID string) string { return n.p() + ".alive." + jobID }

// AliveWildcard matches every AliveSubject.
func (n Names) AliveWildcard() string { return n.p() + ".alive.*" }

// ClientSubject is where the worker asks the submitter to run a client tool.
func (n Names) ClientSubject(jobID string) string { return n.p() + ".client." + jobID }

// TranscriptName is the object name of a job's reflected transcript.
func TranscriptName(jobID string) string { return jobID }

// RawTranscriptName is the object name of a job's raw transcript.
func RawTranscriptName(jobID string) string { return jobID + ".raw" }

// JournalObjectName is the object that holds a journal entry too large
// for a KV value (a tool's long output), referenced from the entry's key.
func JournalObjectName(jobID, entry string) string { return jobID + ".journal." + entry }

// CheckpointName is the object name of a job's last checkpoint.
func CheckpointName(jobID string) string { return jobID + ".checkpoint" }
