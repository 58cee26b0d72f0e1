package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/journal"
)

// Runner runs one attempt of a job. The worker owns everything around it:
// acks, heartbeats, state, dead letters, transcripts. ctx is cancelled when
// the job is cancelled, times out or the worker hands it back at shutdown;
// the worker tells these apart itself, so a Runner just returns ctx's error.
//
// A returned error fails the job, unless it is marked with Retryable. A
// nil error with an Outcome succeeds it.
type Runner interface {
	Run(ctx context.Context, job *Job, env RunEnv) (*Outcome, error)
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error)

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
	return f(ctx, job, env)
}

// RunEnv is what a running job may use of its worker.
type RunEnv interface {
	// Attempt is the delivery attempt, 1-based.
	Attempt() int
	// WorkerID names the worker running the job.
	WorkerID() string
	// Emit publishes an event on agent.events.<job_id>.<type> with
	// Nats-Msg-Id <job_id>.<attempt>.<seq>. data is marshalled as JSON (nil
	// omits it); round 0 means "not in a round". Data too large for the
	// server is stored in the transcript bucket and the event carries a
	// preview with a reference to it (Client.EventData reads it back). Emit is safe for
	// concurrent use and keeps events in call order. It publishes even
	// after ctx is cancelled, so a cancelled job's last events are not lost.
	Emit(ctx context.Context, typ string, round int, data any) error
	// LoadCheckpoint returns the job's last saved checkpoint, or nil when
	// there is none (a first attempt).
	LoadCheckpoint(ctx context.Context) ([]byte, error)
	// SaveCheckpoint stores data as the job's checkpoint, beside its
	// transcript, so a redelivered attempt can resume.
	SaveCheckpoint(ctx context.Context, data []byte) error
	// Journal is the job's call journal (internal/journal): Put stores an
	// entry durably, within a bound of its own, and is refused once the
	// attempt lost its job; LoadJournal returns what earlier attempts
	// stored (nil for an attempt that is the message's first).
	Journal() journal.Store
	LoadJournal(ctx context.Context) (map[string][]byte, error)
	// Conn is the worker's NATS connection, for client tools (a request
	// on Names().ClientSubject(job id) that the submitter answers).
	Conn() *nats.Conn
	// Names is the deployment's naming.
	Names() Names
}

// eventTypeRE keeps types to subject-safe tokens (dots allowed: they add
// subject levels, which agent.events.<job_id>.> still matches).
var eventTypeRE = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// publishTimeout bounds one publish to JetStream.
const publishTimeout = 10 * time.Second

type runEnv struct {
	w       *Worker
	jobID   string
	attempt int

	mu  sync.Mutex // orders seq with publish
	seq int

	// fenced is set when the attempt lost its job (fence.go): its events
	// and checkpoints are refused from then on.
	fenced *atomic.Bool

	// checkpointObject: the job's checkpoint is (or may be) an object,
	// to delete when the job ends (journal.go).
	checkpointObject atomic.Bool
}

// refuse reports whether the attempt may no longer act for its job.
func (e *runEnv) refuse() error {
	if e.fenced != nil && e.fenced.Load() {
		return fmt.Errorf("job %s attempt %d: %w", e.jobID, e.attempt, errFenced)
	}
	return nil
}

func (e *runEnv) Attempt() int     { return e.attempt }
func (e *runEnv) WorkerID() string { return e.w.cfg.WorkerID }
func (e *runEnv) Conn() *nats.Conn { return e.w.cfg.Conn }
func (e *runEnv) Names() Names     { return e.w.names }

func (e *runEnv) Emit(ctx context.Context, typ string, round int, data any) error {
	if err := e.refuse(); err != nil {
		return err
	}
	var raw json.RawMessage
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			return fmt.Errorf("event %s: %w", typ, err)
		}
		raw = b
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	ev := Event{
		JobID: e.jobID, Type: typ, Attempt: e.attempt, Seq: e.seq, Round: round,
		Worker: e.w.cfg.WorkerID, Data: raw,
	}
	// Too large for NATS (a tool's full output): store the data, publish a
	// preview that points at it (see bigevent.go).
	if budget := e.w.payloadBudget(); len(raw) > budget {
		octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
		reduced, err := e.w.offloadEventData(octx, ev, budget)
		cancel()
		if err != nil {
			return err
		}
		ev.Data = reduced
	}
	return e.w.publishEvent(ctx, ev)
}

func (w *Worker) publishEvent(ctx context.Context, ev Event) error {
	return publishEvent(ctx, w.topo.JS, w.names, ev)
}

// publishEvent stamps and publishes ev. It detaches from ctx's
// cancellation (not its values) so terminal events of cancelled jobs go out.
func publishEvent(ctx context.Context, js jetstream.JetStream, n Names, ev Event) error {
	if !eventTypeRE.MatchString(ev.Type) {
		return fmt.Errorf("event type %q is not a subject-safe token", ev.Type)
	}
	if ev.Seq == 0 {
		ev.Seq = 1
	}
	ev.Time = time.Now().UTC()
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	m := nats.NewMsg(n.EventSubject(ev.JobID, ev.Type))
	m.Data = b
	id := fmt.Sprintf("%s.%d.%d", ev.JobID, ev.Attempt, ev.Seq)
	if _, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(id)); err != nil {
		return fmt.Errorf("publish event %s of %s: %w", ev.Type, ev.JobID, err)
	}
	return nil
}
