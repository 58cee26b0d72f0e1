package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
)

// Client submits and follows jobs: what the submit CLI is made of. It only
// binds to assets a worker created.
type Client struct {
	nc     *nats.Conn
	names  Names
	v      *Validator
	topo   *Topology
	states *stateStore
	// terminalGrace is terminalEventGrace (shorter in tests).
	terminalGrace time.Duration
	// limitWhy says why the job size limit is below the configured one
	// ("" when it is not).
	limitWhy string
	// publishBound and publishTry are submitPublishBound and
	// submitTryTimeout (shorter in tests); onPublishTry, when set, sees
	// each try's outcome (tests).
	publishBound, publishTry time.Duration
	onPublishTry             func(error)
	// publishMsg is topo.JS.PublishMsg (wrapped in tests, to lose an
	// answer).
	publishMsg func(context.Context, *nats.Msg, ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

// ClientConfig configures a Client.
type ClientConfig struct {
	// Prefix of the wire contract ("" means DefaultPrefix).
	Prefix string
	// MaxJobBytes is the size limit checked before publishing (should
	// match the workers'; default DefaultMaxJobBytes; lowered to
	// MaxJobBytesFor the connection).
	MaxJobBytes int
}

// NewClient binds to the deployment's streams and buckets.
func NewClient(ctx context.Context, nc *nats.Conn, cfg ClientConfig) (*Client, error) {
	names, err := NewNames(cfg.Prefix)
	if err != nil {
		return nil, err
	}
	// Lowered to what the server carries, so a job over it is refused here
	// with the limit named rather than by the server's max_payload check.
	limit := cfg.MaxJobBytes
	if limit <= 0 {
		limit = DefaultMaxJobBytes
	}
	var limitWhy string
	if most := MaxJobBytesFor(nc); most > 0 && most < limit {
		limit = most
		limitWhy = fmt.Sprintf("the server's max_payload %d less %d for headers", nc.MaxPayload(), JobHeaderRoom)
	}
	v, err := NewValidator(limit)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	topo, err := OpenTopology(ctx, js, names)
	if err != nil {
		return nil, err
	}
	return &Client{nc: nc, names: names, v: v, topo: topo, states: newStateStore(topo.State), limitWhy: limitWhy,
		terminalGrace: terminalEventGrace, publishBound: submitPublishBound, publishTry: submitTryTimeout,
		publishMsg: topo.JS.PublishMsg}, nil
}

// Names is the deployment's naming.
func (c *Client) Names() Names { return c.names }

// Receipt tells what Submit did.
type Receipt struct {
	ID    string `json:"id"`
	Queue string `json:"queue"`
	// Seq is the job's sequence in the jobs stream (0 when not published).
	Seq uint64 `json:"seq,omitempty"`
	// Duplicate: the id was submitted before (within the duplicate window,
	// or it already has a final state), so nothing new was queued.
	Duplicate bool `json:"duplicate"`
	// State is the job's state after submitting.
	State *State `json:"state,omitempty"`
}

// SubmitRaw validates a job payload exactly as a worker would and submits it.
func (c *Client) SubmitRaw(ctx context.Context, data []byte) (*Receipt, error) {
	j, err := c.v.DecodeJob(data)
	if err != nil {
		return nil, err
	}
	return c.Submit(ctx, j)
}

// Submit gives the job an id (a ULID) when it has none, validates it,
// records it as queued and publishes it on agent.jobs.<queue> with
// Nats-Msg-Id = id, and the W3C trace context of ctx's span when it has
// one (the job's span in the worker is then its child). Submitting an id again is safe: within the duplicate
// window the stream drops the copy, and an id whose state is final is not
// published at all; both come back with Duplicate set.
func (c *Client) Submit(ctx context.Context, job *Job) (*Receipt, error) {
	j := *job
	if j.ID == "" {
		j.ID = ulid.Make().String()
	}
	if j.Queue == "" {
		j.Queue = DefaultQueue
	}
	// Without HTML escaping, which made each '<', '>' and '&' six bytes
	// (\u003c): a job under the limit as written (HTML, code) was refused
	// as too large, and its size named was not the job's.
	data, err := EncodeNoEscape(&j)
	if err != nil {
		return nil, err
	}
	if _, err := c.v.DecodeJob(data); err != nil {
		return nil, c.tooLarge(err, job)
	}
	created := false
	now := time.Now().UTC()
	// Held: recordSeq writes against the revision the create returned,
	// without reading the state again.
	c.states.hold(j.ID)
	defer c.states.release(j.ID)
	// Retried while the state bucket cannot be reached (a cluster node
	// restarting, its group electing a leader): one try failed the submit.
	st, err := c.states.updateRetriedFull(ctx, j.ID, func(cur *State) (*State, error) {
		if cur != nil {
			// A try whose answer was lost wrote this one: still ours.
			created = created && cur.Status == StatusQueued && cur.CreatedAt.Equal(now)
			return nil, nil
		}
		created = true
		return &State{ID: j.ID, Queue: j.Queue, Status: StatusQueued, Task: summary(j.Task), CreatedAt: now}, nil
	}, true)
	var bad *badStateError
	if errors.As(err, &bad) {
		// Whether a job of the id ran cannot be told: not taken over.
		return nil, fmt.Errorf("%w: submit it under another id, or delete the key first (nats kv del %s %s)",
			err, c.names.StateBucket(), j.ID)
	}
	if err != nil {
		return nil, err
	}
	r := &Receipt{ID: j.ID, Queue: j.Queue, State: st}
	if !created && st.Status.Terminal() {
		r.Duplicate = true
		return r, nil
	}
	m := nats.NewMsg(c.names.JobsSubject(j.Queue))
	m.Data = data
	injectTraceContext(ctx, m.Header) // the caller's span, if any, parents the job's (see tracecontext.go)
	ack, unanswered, err := c.publishJob(ctx, m, j.ID)
	if err != nil {
		if created {
			c.forgetQueued(ctx, j.ID)
		}
		return nil, fmt.Errorf("publish job %s: %w", j.ID, storeFull(err))
	}
	// A duplicate after a try of ours went unanswered is that try's
	// message, stored with its answer lost (the same bytes: the stream's
	// ack names its sequence): the job is this Submit's. Taken for
	// someone else's, the receipt said duplicate and the queued state got
	// no sequence, so a cancel while queued could not delete the message.
	// With the state created here, no other Submit published this id.
	ours := !ack.Duplicate || unanswered
	r.Seq, r.Duplicate = ack.Sequence, !ours || !created
	if created && ours {
		if st := c.recordSeq(ctx, j.ID, j.Queue, ack.Sequence); st != nil {
			r.State = st
		}
	}
	return r, nil
}

// submitPublishBound bounds Submit's publish, tries included, and
// submitTryTimeout one try. One try, as before, failed a batch's jobs
// with "no response from stream" while a cluster node was restarted (its
// stream group electing a leader for a few seconds) and one whose answer
// a restarted server swallowed spent the whole request timeout. Sending
// again is safe: Nats-Msg-Id = id, so the stream keeps one copy within
// its duplicate window (minutes, far above this bound).
const (
	submitPublishBound = 30 * time.Second
	submitTryTimeout   = 5 * time.Second
)

// publishJob publishes a job's message, again with backoff while the
// stream cannot be reached, within publishBound (and ctx).
// unanswered says a try went unanswered (its message may be stored).
func (c *Client) publishJob(ctx context.Context, m *nats.Msg, id string) (_ *jetstream.PubAck, unanswered bool, _ error) {
	ctx, cancel := context.WithTimeout(ctx, c.publishBound)
	defer cancel()
	tries := 0
	var last error // the last try's error, a cut try's kept behind a telling one
	op := func() (*jetstream.PubAck, error) {
		tries++
		tctx, cancel := context.WithTimeout(ctx, c.publishTry)
		defer cancel()
		ack, err := c.publishMsg(tctx, m, jetstream.WithMsgID(id))
		if c.onPublishTry != nil {
			c.onPublishTry(err)
		}
		if err == nil {
			return ack, nil
		}
		timedOut := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
		unanswered = unanswered || timedOut
		if last == nil || !timedOut {
			last = err
		}
		if ctx.Err() != nil || !unreachable(err) {
			return nil, backoff.Permanent(err)
		}
		return nil, err
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 100*time.Millisecond, 2*time.Second
	ack, err := backoff.RetryWithData(op, backoff.WithContext(b, ctx))
	switch {
	case err == nil:
		return ack, unanswered, nil
	case last == nil: // ctx ended before a try
		return nil, unanswered, err
	case !unreachable(last):
		return nil, unanswered, last
	case unanswered:
		return nil, true, fmt.Errorf("%w (%d tries in %s; it may have been queued all the same: submitting the same id again does not queue it twice)",
			last, tries, c.publishBound)
	}
	return nil, false, fmt.Errorf("%w (%d tries in %s)", last, tries, c.publishBound)
}

// unreachable reports whether a publish failed for want of an answer
// from the stream, which a moment later may give one: no responders (no
// leader, a node restarting), a lost request or answer, JetStream
// briefly unavailable (jsClusterNotAvailable; other 503s, a store full or
// insufficient resources, stay refusals).
func unreachable(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		(errors.As(err, &api) && api.ErrorCode == jsClusterNotAvailable)
}

// tooLarge says, of a job refused as too large, where its size and the
// limit come from: a job file of 61,439 bytes, limit 61,440, was refused
// as "job too large: 61457 bytes, limit 61440", the id or queue Submit
// fills in counted and the limit lowered to the server's max_payload
// without a word.
func (c *Client) tooLarge(err error, job *Job) error {
	if !errors.Is(err, ErrTooLarge) {
		return err
	}
	var why []string
	if job.ID == "" || job.Queue == "" {
		why = append(why, "the size is the job as published, with the id and queue filled in")
	}
	if c.limitWhy != "" {
		why = append(why, "the limit is "+c.limitWhy)
	}
	if len(why) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(why, "; "))
}

// recordSeq writes the stream sequence of a job's message into the queued
// state Submit created, so a Cancel while it is queued can delete the
// message (dropQueued): a cancelled job's message otherwise stays in the
// jobs stream until a worker of its queue takes it, forever on a queue no
// worker serves (counted there as a job waiting). A state a worker claimed
// meanwhile is left alone. One Cancel may have come between the state's
// creation and the publish, before the sequence was known: the message is
// deleted here then. Best effort: without the sequence a cancelled job's
// message is acked, unrun, by the worker that takes it, as before. It
// returns the state written, or nil.
func (c *Client) recordSeq(ctx context.Context, id, queue string, seq uint64) *State {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	cancelled := false
	st, err := c.states.update(ctx, id, func(cur *State) (*State, error) {
		cancelled = false
		switch {
		case cur == nil || cur.Attempt != 0 || cur.StreamSeq != 0:
			return nil, nil // claimed by a worker (or forgotten)
		case cur.Status == StatusQueued:
			cur.StreamSeq = seq
			return cur, nil
		case cur.Status == StatusCancelled:
			cancelled = true
		}
		return nil, nil
	})
	if err != nil {
		return nil
	}
	if cancelled {
		c.dropQueued(ctx, id, queue, seq)
		return nil
	}
	if st == nil || st.StreamSeq != seq {
		return nil
	}
	return st
}

// dropQueued deletes the message of a job cancelled before any worker
// claimed it from the jobs stream (dropQueuedMsg).
func (c *Client) dropQueued(ctx context.Context, id, queue string, seq uint64) {
	dropQueuedMsg(ctx, c.topo, c.names, id, queue, seq)
}

// forgetQueued removes the queued state Submit created for a job it could
// not publish, so no state says "queued" with no message to settle it. The
// delete is guarded by the state's revision: if the message did arrive
// after all (an unanswered publish) and a worker claimed it, the state stays.
func (c *Client) forgetQueued(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	if st, rev, err := c.states.get(ctx, id); err == nil && st.Status == StatusQueued && st.Attempt == 0 {
		_ = c.topo.State.Delete(ctx, id, jetstream.LastRevision(rev))
	}
}

// Status returns the job's state, or ErrNotFound.
func (c *Client) Status(ctx context.Context, id string) (*State, error) {
	st, _, err := c.states.get(ctx, id)
	return st, err
}

// QueuedMessageGone reports whether job id is queued on a message (its
// state's stream_seq) that the jobs stream no longer holds: purged (nats
// stream purge), deleted, expired by a max age an operator set, or gone
// with the stream (nats stream rm, which a refused setting advises). No
// worker will run such a job, and the id cannot be submitted again (the
// queued state makes it a resubmission), so a follower waited for ever in
// silence. rev is the state's revision: a message a worker removed an
// instant before it writes the job's state (a job refused at the door) is
// gone for a moment with the state unchanged, so a caller should report
// only the same revision found gone twice, some seconds apart. A state
// without a sequence (published by hand, or its sequence never recorded)
// is never reported. An error with a state is the message's read (refused
// by the server's permissions, say); with none, the state's.
func (c *Client) QueuedMessageGone(ctx context.Context, id string) (st *State, rev uint64, gone bool, err error) {
	st, rev, err = c.states.get(ctx, id)
	if err != nil || st.Status != StatusQueued || st.StreamSeq == 0 {
		return st, rev, false, err
	}
	_, err = c.topo.Jobs.GetMsg(ctx, st.StreamSeq)
	switch {
	case err == nil:
		return st, rev, false, nil
	case !errors.Is(err, jetstream.ErrMsgNotFound) && !errors.Is(err, jetstream.ErrStreamNotFound):
		return st, rev, false, fmt.Errorf("message %d of %s: %w", st.StreamSeq, c.names.JobsStream(), err)
	}
	// Read again: claimed, settled or handed back meanwhile, it moved on.
	now, nowRev, err := c.states.get(ctx, id)
	if err != nil {
		return nil, 0, false, err
	}
	return now, nowRev, nowRev == rev, nil
}

// Wait returns the job's state once it is final.
func (c *Client) Wait(ctx context.Context, id string) (*State, error) {
	return c.states.wait(ctx, id, func(s *State) bool { return s.Status.Terminal() })
}

// terminalEventGrace is how long Watch waits for the terminal event after
// the state turned final when the events stream does not hold it yet (the
// worker writes the state first, then publishes the event).
const terminalEventGrace = 2 * time.Second

// storedEventWait bounds Watch's wait for a terminal event the stream
// already holds: its consumer delivers it, however slowly (a fixed grace
// missed it on a loaded machine); only an event expired meanwhile would
// not come.
const storedEventWait = time.Minute

// Watch calls fn for each event of the job, from its first, and returns the
// final state once the job ends. fn runs on Watch's goroutine.
func (c *Client) Watch(ctx context.Context, id string, fn func(Event)) (*State, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cons, err := c.topo.Events.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{c.names.EventsFilter(id)},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("watch events of %s: %w", id, err)
	}
	evs := make(chan Event, 64)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var ev Event
		if json.Unmarshal(m.Data(), &ev) != nil {
			return
		}
		select {
		case evs <- ev:
		case <-ctx.Done():
		}
	})
	if err != nil {
		return nil, fmt.Errorf("watch events of %s: %w", id, err)
	}
	defer cc.Stop()
	final := make(chan *State, 1)
	go func() {
		if st, err := c.Wait(ctx, id); err == nil {
			final <- st
		}
	}()
	var st *State
	var grace <-chan time.Time
	for {
		select {
		case ev := <-evs:
			fn(ev)
			if TerminalEvent(ev.Type) {
				return c.Status(ctx, id)
			}
		case st = <-final:
			wait := c.terminalGrace
			if c.terminalEventStored(ctx, id, st.Status) {
				wait = storedEventWait
			}
			grace = time.After(wait)
		case <-grace:
			return st, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// terminalEventStored reports whether the events stream holds the job's
// event of its final status.
func (c *Client) terminalEventStored(ctx context.Context, id string, status Status) bool {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	_, err := c.topo.Events.GetLastMsgForSubject(ctx, c.names.EventSubject(id, string(status)))
	return err == nil
}

// Transcript returns the stored transcript object of a job: the reflected
// one, or the raw one (what the model saw) when raw is set.
func (c *Client) Transcript(ctx context.Context, id string, raw bool) ([]byte, error) {
	name := TranscriptName(id)
	if raw {
		name = RawTranscriptName(id)
	}
	b, err := c.topo.Transcripts.GetBytes(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: no transcript %s", ErrNotFound, name)
	}
	return b, err
}

// cancelRequestTimeout bounds waiting for a worker to confirm a cancel.
const cancelRequestTimeout = 2 * time.Second

// Cancel stops a job. A queued job becomes cancelled at once, and its
// message is deleted from the jobs stream when Submit recorded its
// sequence (a worker that takes the message all the same acks it without
// running it). A running job gets
// cancel_requested in its state and a request on agent.cancel.<id>, which
// the worker running it answers by cancelling the job's context; Cancel
// then waits, within ctx, for the final state. A final job is returned as is.
func (c *Client) Cancel(ctx context.Context, id string) (*State, error) {
	if !ValidID(id) {
		return nil, fmt.Errorf("%w: %q is not a job id", ErrNotFound, id)
	}
	st, was, err := cancelTransition(ctx, c.topo, c.states, c.names, id)
	switch {
	case err != nil && st == nil:
		return nil, err
	case was.Terminal():
		// Cancelled unrun by an earlier cancel whose event was lost: it
		// goes out now.
		return st, ensureCancelledEvent(ctx, c.topo, c.names, st)
	case st.Status == StatusCancelled:
		return st, err
	}
	if _, err := c.nc.Request(c.names.CancelSubject(id), nil, cancelRequestTimeout); err != nil &&
		!errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, nats.ErrTimeout) {
		return nil, fmt.Errorf("cancel %s: %w", id, err)
	}
	// With no reply, the job is between workers: the next attempt sees
	// cancel_requested and ends it without running.
	return c.Wait(ctx, id)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// QueueServed reports whether a worker has ever served queue: its shared
// consumer exists. A job for a queue without one waits, unseen, until a
// worker serving that queue starts.
func (c *Client) QueueServed(ctx context.Context, queue string) (bool, error) {
	if queue == "" {
		queue = DefaultQueue
	}
	_, err := c.topo.Jobs.Consumer(ctx, c.names.Consumer(queue))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("consumer of queue %s: %w", queue, err)
	}
}

// ServedQueues lists the queues workers have served (those with a shared
// consumer), sorted.
func (c *Client) ServedQueues(ctx context.Context) ([]string, error) {
	var queues []string
	prefix := c.names.Consumer("")
	names := c.topo.Jobs.ConsumerNames(ctx)
	for name := range names.Name() {
		if q, ok := strings.CutPrefix(name, prefix); ok && q != "" {
			queues = append(queues, q)
		}
	}
	if err := names.Err(); err != nil {
		return nil, fmt.Errorf("consumers of %s: %w", c.names.JobsStream(), err)
	}
	slices.Sort(queues)
	return queues, nil
}

// EventData is ev's data in full: for an event too large for NATS, which
// carries a preview and a data_ref (see DataRef), the data read back from
// the transcript store; otherwise ev.Data as it is.
func (c *Client) EventData(ctx context.Context, ev Event) (json.RawMessage, error) {
	ref, ok := EventDataRef(ev)
	if !ok {
		return ev.Data, nil
	}
	b, err := c.readRef(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("event %s of %s: data %w", ev.Type, ev.JobID, err)
	}
	return b, nil
}
