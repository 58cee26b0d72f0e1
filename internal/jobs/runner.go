package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
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
	// concurrent use and keeps events in call order. Publishing is
	// asynchronous (eventpub.go): the worker awaits every event's ack
	// before it stores the outcome, and while NATS is away events wait in
	// a bounded backlog; Emit fails only when the attempt is fenced, the
	// type is not subject-safe, or the backlog is full (an events.gap event
	// then records the lost seqs). It publishes even after ctx is
	// cancelled, so a cancelled job's last events are not lost.
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
	// journaled: the attempt stored a journal entry or checkpoint (its
	// job's keys are purged when it ends).
	journaled atomic.Bool
	// journalObjects are the objects holding journal entries too large
	// for KV values, deleted with the journal.
	objMu          sync.Mutex
	journalObjects []string
	// journalLoaded: LoadJournal read the earlier attempts' entries, so
	// journalObjects names every object of the job's journal.
	journalLoaded atomic.Bool

	// pub holds the attempt's events until they are acknowledged
	// (eventpub.go); gap* are events it had to refuse, not yet reported
	// by an events.gap event. Both under mu.
	pub                        *eventPub
	gapFirst, gapLast, gapLost int
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
	if !eventTypeRE.MatchString(typ) {
		return fmt.Errorf("event type %q is not a subject-safe token", typ)
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
	e.reportGapLocked()
	e.seq++
	ev := Event{
		JobID: e.jobID, Type: typ, Attempt: e.attempt, Seq: e.seq, Round: round,
		Worker: e.w.cfg.WorkerID, Data: raw,
	}
	// Too large for NATS (a tool's full output): store the data, publish a
	// preview that points at it (see bigevent.go).
	if budget := e.w.eventBudget(); len(raw) > budget {
		octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
		reduced, err := e.w.offloadEventData(octx, ev, budget)
		cancel()
		if err != nil {
			return err
		}
		ev.Data = reduced
	}
	return e.queueLocked(ev)
}

// events is the attempt's event backlog (mu held).
func (e *runEnv) eventsLocked() *eventPub {
	if e.pub == nil {
		e.pub = &eventPub{js: e.w.topo.JS, nc: e.w.cfg.Conn, limits: e.w.eventBacklog()}
	}
	return e.pub
}

// queueLocked publishes ev asynchronously (eventpub.go); an event the
// backlog has no room for is lost, counted for the events.gap event.
func (e *runEnv) queueLocked(ev Event) error {
	m, err := eventMsg(e.w.names, ev)
	if err != nil {
		return err
	}
	if err := e.eventsLocked().add(ev.Seq, m); err != nil {
		if e.gapLost == 0 {
			e.gapFirst = ev.Seq
			e.w.log.Warn("events lost while NATS is unreachable; an events.gap event will say which",
				"job", e.jobID, "attempt", e.attempt, "first_seq", ev.Seq)
		}
		e.gapLast, e.gapLost = ev.Seq, e.gapLost+1
		return fmt.Errorf("event %s (seq %d) of %s: %w", ev.Type, ev.Seq, e.jobID, err)
	}
	return nil
}

// reportGapLocked publishes the events.gap event of the events lost so
// far, once the backlog has room for it.
func (e *runEnv) reportGapLocked() {
	e.reportTooLargeLocked()
	if e.gapLost == 0 || !e.eventsLocked().room(1024) {
		return
	}
	first, last, lost := e.gapFirst, e.gapLast, e.gapLost
	e.gapLost = 0
	e.seq++
	b, _ := json.Marshal(gapData(first, last, lost))
	ev := Event{JobID: e.jobID, Type: EventGap, Attempt: e.attempt, Seq: e.seq, Worker: e.w.cfg.WorkerID, Data: b}
	if e.queueLocked(ev) == nil {
		e.w.log.Warn("events lost", "job", e.jobID, "attempt", e.attempt, "first_seq", first, "last_seq", last, "lost", lost)
	}
}

// reportTooLargeLocked publishes an events.gap event for the events the
// server refused as larger than its max_payload (eventPub.tooLarge).
func (e *runEnv) reportTooLargeLocked() {
	p := e.eventsLocked()
	seqs := p.takeTooLarge()
	reason := fmt.Sprintf("larger than the server's max_payload of %d bytes (it changed after they were measured): not publishable",
		e.w.cfg.Conn.MaxPayload())
	if refused, why := p.takeRefused(); len(refused) > 0 {
		// Either kind, rarely both: one gap names them all.
		seqs = append(seqs, refused...)
		reason = fmt.Sprintf("refused by the events stream %s (%s: its max_msg_size, an operator's setting)", e.w.names.EventsStream(), why)
	}
	if len(seqs) == 0 {
		return
	}
	first, last := slices.Min(seqs), slices.Max(seqs)
	d := gapData(first, last, len(seqs))
	d["reason"] = reason
	e.seq++
	b, _ := json.Marshal(d)
	ev := Event{JobID: e.jobID, Type: EventGap, Attempt: e.attempt, Seq: e.seq, Worker: e.w.cfg.WorkerID, Data: b}
	if e.queueLocked(ev) == nil {
		e.w.log.Warn("events lost", "job", e.jobID, "attempt", e.attempt, "first_seq", first, "last_seq", last,
			"lost", len(seqs), "reason", d["reason"])
	}
}

// flush waits until the attempt's events are acknowledged (see
// eventPub.flush), reporting a gap first; it returns how many were not.
func (e *runEnv) flush(ctx context.Context) (int, error) {
	e.mu.Lock()
	e.reportGapLocked()
	p := e.eventsLocked()
	e.mu.Unlock()
	fenced := func() bool { return e.refuse() != nil }
	n, err := p.flush(ctx, fenced)
	if err == nil {
		e.mu.Lock()
		gap := e.gapLost > 0 || p.hasTooLarge()
		e.reportGapLocked()
		e.mu.Unlock()
		if gap {
			n, err = p.flush(ctx, fenced)
		}
	}
	return n, err
}

// publishEvent stamps and publishes ev, waiting for its ack. It detaches
// from ctx's cancellation (not its values) so terminal events of cancelled
// jobs go out.
func publishEvent(ctx context.Context, js jetstream.JetStream, n Names, ev Event) error {
	m, err := eventMsg(n, ev)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	if _, err := js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("publish event %s of %s: %w", ev.Type, ev.JobID, err)
	}
	return nil
}

// eventMsg is ev stamped with the time, on its subject, with its
// Nats-Msg-Id <job_id>.<attempt>.<seq>.
func eventMsg(n Names, ev Event) (*nats.Msg, error) {
	if !eventTypeRE.MatchString(ev.Type) {
		return nil, fmt.Errorf("event type %q is not a subject-safe token", ev.Type)
	}
	if ev.Seq == 0 {
		ev.Seq = 1
	}
	ev.Time = time.Now().UTC()
	// Without HTML escaping: json.Marshal would escape the '<', '>' and '&'
	// of ev.Data again, and a preview cut to fit max_payload (bigevent.go,
	// built unescaped) grew up to sixfold past it, its publish refused
	// (nats: maximum payload exceeded) with every later event held behind
	// it. The data is published as measured.
	b, err := EncodeNoEscape(ev)
	if err != nil {
		return nil, err
	}
	m := nats.NewMsg(n.EventSubject(ev.JobID, ev.Type))
	m.Data = b
	m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("%s.%d.%d", ev.JobID, ev.Attempt, ev.Seq))
	return m, nil
}
