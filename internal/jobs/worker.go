package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/textproto"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/cfgerr"
)

// Worker defaults.
const (
	DefaultConcurrency   = 4
	DefaultRetryDelay    = 2 * time.Second
	DefaultRetryDelayMax = time.Minute
	DefaultRequeueDelay  = time.Second
	DefaultShutdownGrace = 30 * time.Second
	DefaultJobTimeout    = 10 * time.Minute
	DefaultFetchWait     = time.Second
	// MaxConcurrency is the most jobs one worker may run at once.
	MaxConcurrency = 10000
)

// ErrShutdown is the cancellation cause of jobs still running when the
// shutdown grace period ends: they are handed back, not failed.
var ErrShutdown = errors.New("worker shutting down")

// errCancelRequested is the cancellation cause of a job cancelled by a user.
var errCancelRequested = errors.New("job cancelled on request")

// Config configures a Worker.
type Config struct {
	// Conn is the NATS connection (required). The worker does not close it.
	Conn *nats.Conn
	// Topology is the JetStream layout, ensured at start.
	Topology TopologyConfig
	// Runner runs jobs (required).
	Runner Runner
	// WorkerID names this worker in states and events (default: host name
	// plus a random suffix).
	WorkerID string
	// Concurrency is how many jobs this worker runs at once. The worker
	// fetches one message per free slot, so nothing waits in a local buffer
	// while its AckWait clock runs.
	Concurrency int
	// Heartbeat is how often a running job's message is marked in progress
	// (default: a third of the shortest ack wait).
	Heartbeat time.Duration
	// RetryDelay and RetryDelayMax shape the exponential delay before a job
	// that failed with a Retryable error is delivered again.
	RetryDelay, RetryDelayMax time.Duration
	// RequeueDelay is the delay of jobs handed back at shutdown.
	RequeueDelay time.Duration
	// ShutdownGrace is how long running jobs may go on after Run's context
	// ends before they are cancelled and handed back.
	ShutdownGrace time.Duration
	// JobTimeout bounds a job that sets no timeout of its own.
	JobTimeout time.Duration
	// FetchWait is how long one pull request waits for a job; it bounds how
	// long shutdown waits for the fetch loops.
	FetchWait time.Duration
	// MaxJobBytes is the job size limit (default DefaultMaxJobBytes, lowered
	// to MaxJobBytesFor(Conn) when the server carries less). A limit above
	// MaxJobBytesFor(Conn) is refused (ErrMaxPayload).
	MaxJobBytes int
	// KnownServer reports whether an MCP server name is configured; a job
	// naming another is dead-lettered. Nil: no servers are configured.
	KnownServer func(name string) bool
	// ServerNames, when set, are the configured MCP servers, named in the
	// reason of a job naming another (with the one it probably meant).
	ServerNames []string
	// Admit, when set, is a further check at the door, after the schema and
	// KnownServer: a job it refuses is dead-lettered with the error's text
	// as the reason (the worker command bounds client tool declarations).
	Admit func(*Job) error
	// Notes, when set, says which of a job's settings are not applied as
	// given (a max_rounds above the cap): the started event and the log
	// carry each note, beside the worker's own (a timeout of 0s).
	Notes func(*Job) []string
	// Metrics, when set, records job counts and durations.
	Metrics *Metrics
	// Logger receives operational logs (default: discarded).
	Logger *slog.Logger
	// UnservedCheck is how often the worker looks for jobs waiting on
	// queues no worker serves, and logs them (default DefaultUnservedCheck;
	// negative: never).
	UnservedCheck time.Duration
	// AssetCheck is how often the worker looks for its streams and buckets
	// and creates again those that are gone (default DefaultAssetCheck;
	// negative: only after an operation of the worker failed).
	AssetCheck time.Duration
	// StartTimeout bounds how long Run retries its first topology setup
	// while JetStream does not answer (the server away or restarting, a
	// cluster without a leader yet); 0: until Run's context ends. Errors a
	// retry would not fix (no JetStream, a conflicting asset) end Run at
	// once.
	StartTimeout time.Duration
}

// Worker consumes jobs from one or more queues and runs them.
type Worker struct {
	cfg    Config
	names  Names
	log    *slog.Logger
	v      *Validator
	topo   *Topology
	states *stateStore
	sem    chan struct{}
	ready  chan struct{}

	jobsCtx context.Context // parent of running jobs; outlives Run's ctx for the grace period
	jobs    sync.WaitGroup

	mu      sync.Mutex
	running map[string]*runningAttempt

	restoreMu sync.Mutex    // one restoreTopology at a time
	checkNow  chan struct{} // nudges assetLoop (checkAssets)

	eventsMaxMsg atomic.Int64 // the events stream's max_msg_size (eventBudget)

	paceMu sync.Mutex
	paces  map[string]pace // by queue, once its consumer was read (pace.go)
	paceCh chan struct{}   // closed when a pace changes

	hbFault heartbeatFault // tests only
	backlog backlogLimits  // tests only: an attempt's event backlog (zero: the defaults)
	// stateKV, tests only, wraps the state bucket (to lose a write).
	stateKV func(jetstream.KeyValue) jetstream.KeyValue
}

// WithDefaults returns c with its zero fields set to the defaults
// (Heartbeat stays 0: NewWorker derives it from the ack wait; MaxJobBytes
// stays 0: NewWorker fits DefaultMaxJobBytes to the server's max_payload).
func (c Config) WithDefaults() Config {
	c.Topology = c.Topology.WithDefaults()
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&c.RetryDelay, DefaultRetryDelay},
		{&c.RetryDelayMax, DefaultRetryDelayMax},
		{&c.RequeueDelay, DefaultRequeueDelay},
		{&c.ShutdownGrace, DefaultShutdownGrace},
		{&c.JobTimeout, DefaultJobTimeout},
		{&c.FetchWait, DefaultFetchWait},
		{&c.UnservedCheck, DefaultUnservedCheck},
		{&c.AssetCheck, DefaultAssetCheck},
	} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	return c
}

// Validate checks the settings of c as given, without Conn and Runner
// (apply WithDefaults first for zero fields), so a binary can refuse a bad
// value before it connects. Errors are *cfgerr.FieldError naming the field
// (a path such as "Topology.AckWait"), wrapping ErrConfig. Whether
// MaxJobBytes fits the server is checked by NewWorker.
func (c Config) Validate() error {
	if err := c.Topology.Validate(); err != nil {
		if fe, ok := cfgerr.As(err); ok {
			for i, f := range fe.Fields {
				fe.Fields[i] = "Topology." + f
			}
		}
		return err
	}
	if c.WorkerID != "" && !ValidID(c.WorkerID) {
		return cfgerr.Field(ErrConfig, "WorkerID", "worker id", "%q must match %s", c.WorkerID, tokenRE)
	}
	for _, d := range []struct {
		field, name string
		v           time.Duration
	}{
		{"RetryDelay", "retry delay", c.RetryDelay},
		{"RetryDelayMax", "retry delay max", c.RetryDelayMax},
		{"RequeueDelay", "requeue delay", c.RequeueDelay},
		{"ShutdownGrace", "shutdown grace", c.ShutdownGrace},
		{"JobTimeout", "job timeout", c.JobTimeout},
		{"FetchWait", "fetch wait", c.FetchWait},
	} {
		if d.v <= 0 {
			return cfgerr.Field(ErrConfig, d.field, d.name, "must be positive (got %s)", d.v)
		}
	}
	if c.RetryDelayMax < c.RetryDelay {
		return cfgerr.Fields(ErrConfig, []string{"RetryDelayMax", "RetryDelay"}, "retry delay max",
			"%s must not be below the retry delay %s", c.RetryDelayMax, c.RetryDelay)
	}
	if c.StartTimeout < 0 {
		return cfgerr.Field(ErrConfig, "StartTimeout", "start timeout", "must not be negative (got %s)", c.StartTimeout)
	}
	if c.Concurrency < 1 || c.Concurrency > MaxConcurrency {
		// Each slot is an agent loop with its model and tool calls: far
		// more than this in one process is a slip (99999999999 was taken).
		return cfgerr.Field(ErrConfig, "Concurrency", "concurrency", "must be 1..%d (got %d)", MaxConcurrency, c.Concurrency)
	}
	if c.MaxJobBytes != 0 && c.MaxJobBytes < minJobBytes {
		return cfgerr.Field(ErrConfig, "MaxJobBytes", "max job bytes", "must be at least %d (got %d)", minJobBytes, c.MaxJobBytes)
	}
	shortest, field := c.Topology.shortestAckWait()
	// At most half: a heartbeat's flush may take half its interval, and an
	// attempt fences itself when none got through for the ack wait less
	// half a heartbeat, so a longer one fenced every job (above two thirds,
	// before its first heartbeat was due).
	if c.Heartbeat < 0 || c.Heartbeat > shortest/2 {
		what := "the ack wait"
		if field == "BackOff" {
			what = "the shortest backoff step"
		}
		return cfgerr.Fields(ErrConfig, []string{"Heartbeat", "Topology." + field}, "heartbeat",
			"%s must be positive and at most half %s %s", c.Heartbeat, what, shortest)
	}
	return nil
}

// NewWorker validates cfg and fills defaults.
func NewWorker(cfg Config) (*Worker, error) {
	if cfg.Conn == nil {
		return nil, cfgerr.Field(ErrConfig, "Conn", "", "a NATS connection is required")
	}
	if cfg.Runner == nil {
		return nil, cfgerr.Field(ErrConfig, "Runner", "", "a Runner is required")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	names := cfg.Topology.Names
	if cfg.WorkerID == "" {
		host, _ := os.Hostname()
		cfg.WorkerID = defaultWorkerID(host, ulid.Make().String()[20:])
	}
	if cfg.Heartbeat == 0 {
		shortest, _ := cfg.Topology.shortestAckWait()
		cfg.Heartbeat = shortest / 3
	}
	var err error
	if cfg.MaxJobBytes, err = fitJobLimit(cfg.Conn, cfg.MaxJobBytes); err != nil {
		return nil, err
	}
	v, err := NewValidator(cfg.MaxJobBytes)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Worker{
		cfg: cfg, names: names, v: v,
		log:      log.With("worker", cfg.WorkerID),
		sem:      make(chan struct{}, cfg.Concurrency),
		ready:    make(chan struct{}),
		running:  map[string]*runningAttempt{},
		checkNow: make(chan struct{}, 1),
		paces:    map[string]pace{},
		paceCh:   make(chan struct{}),
	}, nil
}

// defaultWorkerID is host, lower-cased, and suffix, made a valid worker
// id (ValidID): each run of characters an id may not hold (the dots of
// "node1.example.com", anything beyond ASCII) becomes one "-", and the
// host part is cut to leave room for the suffix. A host name with nothing
// usable gives "worker". A host name with dots used to give an id that
// JETAGENT_WORKER_ID itself would refuse.
func defaultWorkerID(host, suffix string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(host) {
		if r == '_' || r == '-' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') {
			b.WriteRune(r)
			dash = r == '-'
			continue
		}
		if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	h := strings.Trim(b.String(), "-")
	if room := 128 - 1 - len(suffix); len(h) > room {
		h = strings.TrimRight(h[:room], "-")
	}
	if h == "" {
		h = "worker"
	}
	return h + "-" + strings.ToLower(suffix)
}

// ID is the worker id.
func (w *Worker) ID() string { return w.cfg.WorkerID }

// Ready is closed once the topology exists and the worker takes jobs.
func (w *Worker) Ready() <-chan struct{} { return w.ready }

// Run ensures the topology, then takes and runs jobs until ctx ends. Then
// it stops taking jobs, lets running ones finish for ShutdownGrace, hands
// the rest back (NakWithDelay) and returns. It returns an error only when
// it cannot start; while JetStream does not answer it waits (see
// StartTimeout), and a ctx that ends meanwhile returns nil.
func (w *Worker) Run(ctx context.Context) error {
	// Asynchronous publishes (events, transcripts) resolve within
	// publishTimeout even when their ack is lost (eventpub.go).
	js, err := jetstream.New(w.cfg.Conn, jetstream.WithPublishAsyncTimeout(publishTimeout))
	if err != nil {
		return err
	}
	w.topo, err = w.ensureTopology(ctx, js)
	if err != nil {
		if ctx.Err() != nil {
			w.log.Info("worker stopped before it was ready")
			return nil
		}
		return fmt.Errorf("JetStream topology: %w", err)
	}
	w.eventsMaxMsg.Store(int64(w.topo.Events.CachedInfo().Config.MaxMsgSize))
	kv := w.topo.State
	if w.stateKV != nil {
		kv = w.stateKV(kv)
	}
	w.states = newStateStore(kv)
	sub, err := w.cfg.Conn.Subscribe(w.names.CancelWildcard(), w.onCancel)
	if err != nil {
		return fmt.Errorf("subscribe to cancel requests: %w", err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // best effort at exit
	// One worker of the deployment ends a queued job a cancel request
	// names (cancel.go): the request used to reach only a running attempt.
	queuedSub, err := w.cfg.Conn.QueueSubscribe(w.names.CancelWildcard(), cancelQueueGroup, w.onCancelQueued)
	if err != nil {
		return fmt.Errorf("subscribe to cancel requests: %w", err)
	}
	defer queuedSub.Unsubscribe() //nolint:errcheck // best effort at exit
	aliveSub, err := w.cfg.Conn.Subscribe(w.names.AliveWildcard(), w.onAlive)
	if err != nil {
		return fmt.Errorf("subscribe to liveness requests: %w", err)
	}
	defer aliveSub.Unsubscribe() //nolint:errcheck // best effort at exit

	jobsCtx, stopJobs := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopJobs(nil)
	w.jobsCtx = jobsCtx

	var loops sync.WaitGroup
	for q, c := range w.topo.Consumers {
		loops.Go(func() { w.fetchLoop(ctx, q, c) })
	}
	loops.Go(func() { w.deadLetterLoop(ctx) })
	loops.Go(func() { w.unservedLoop(ctx) })
	loops.Go(func() { w.assetLoop(ctx) })
	w.log.Info("worker ready", "queues", w.cfg.Topology.Queues, "concurrency", w.cfg.Concurrency)
	close(w.ready)

	<-ctx.Done()
	loops.Wait() // no new jobs from here on
	done := make(chan struct{})
	go func() { w.jobs.Wait(); close(done) }()
	grace := time.NewTimer(w.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		w.log.Info("shutdown grace over: handing back running jobs")
		stopJobs(ErrShutdown)
		<-done
	}
	w.log.Info("worker stopped")
	return nil
}

// fetchLoop takes jobs from queue's consumer into free slots. It asks for
// as many jobs as there are free slots, so a full queue keeps every slot
// busy, and never for more: nothing waits in a local buffer while its ack
// wait runs. Which request it sends depends on what the consumer had left
// after the last delivery (its NumPending): none, one long poll for one job
// (holding one slot, as each queue's loop does while it waits); some, a
// no-wait request for min(left, free slots) jobs, answered at once.
func (w *Worker) fetchLoop(ctx context.Context, queue string, c jetstream.Consumer) {
	left := uint64(0) // jobs the consumer had left after the last delivery
	// A fetch fails every FetchWait while the consumer's leader is away
	// (a node cut off from the quorum): a line a second said nothing new.
	fails := newFailRun(w.log, "fetch", "queue", queue)
	for {
		select {
		case w.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		if ctx.Err() != nil {
			// Both were ready (a slot freed as the worker stopped) and
			// select picked the slot: a fetch now would take jobs only to
			// hand them back, each spending one of its deliveries.
			<-w.sem
			return
		}
		held := 1
		if left > 0 {
			held += w.moreSlots(int(min(left, uint64(w.cfg.Concurrency))) - 1)
		}
		var batch jetstream.MessageBatch
		var err error
		if left > 0 {
			batch, err = c.FetchNoWait(held)
		} else {
			// Not FetchContext, to end the poll with ctx: its expiry leaves
			// the client a tenth of the wait after the server's, and a job
			// the server sends to a poll the client has just ended is
			// lost until its ack wait (a delivery spent): under load in
			// tests, jobs dead-lettered undelivered. FetchMaxWait keeps a
			// second; a job that comes in a poll open while the worker
			// stops is handed back (below).
			batch, err = c.Fetch(1, jetstream.FetchMaxWait(w.cfg.FetchWait))
		}
		got, stopped := 0, false
		if err == nil {
			for msg := range batch.Messages() {
				if ctx.Err() != nil { // arrived as we stopped: hand it straight back
					_ = msg.NakWithDelay(w.cfg.RequeueDelay)
					stopped = true
					continue
				}
				got++
				if md, merr := msg.Metadata(); merr == nil {
					left = md.NumPending
				}
				w.jobs.Add(1)
				go func() {
					defer w.jobs.Done()
					defer func() { <-w.sem }()
					w.handle(queue, msg)
				}()
			}
			err = batch.Error()
		}
		for range held - got { // the slots no job came for
			<-w.sem
		}
		if got == 0 {
			left = 0 // drained (or another worker took them): wait for one
		}
		if stopped || ctx.Err() != nil {
			return
		}
		if err == nil || errors.Is(err, nats.ErrTimeout) {
			fails.ok()
		} else {
			fails.fail(err)
			w.restoreTopology(ctx, c)
			select { // do not spin while NATS is away
			case <-ctx.Done():
				return
			case <-time.After(w.cfg.FetchWait):
			}
		}
	}
}

// moreSlots takes up to n more free slots without waiting and reports how
// many it took.
func (w *Worker) moreSlots(n int) int {
	for i := range n {
		select {
		case w.sem <- struct{}{}:
		default:
			return i
		}
	}
	return n
}

// opContext is for NATS operations that must complete even while the
// worker shuts down.
func opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), publishTimeout)
}

// handle checks one delivery at the door and runs it.
func (w *Worker) handle(queue string, msg jetstream.Msg) {
	md, err := msg.Metadata()
	if err != nil {
		w.log.Error("delivery without metadata", "err", err)
		_ = msg.Term()
		return
	}
	d := delivery{
		msg: msg, queue: queue, attempt: int(md.NumDelivered), deliveries: int(md.NumDelivered),
		seq: md.Sequence.Stream, published: md.Timestamp,
	}
	job, rejectErr := w.v.DecodeJob(msg.Data())
	if rejectErr == nil {
		rejectErr = CheckQueue(job, queue, w.names)
	}
	if rejectErr == nil {
		rejectErr = CheckServers(job, w.cfg.KnownServer, w.cfg.ServerNames...)
	}
	if rejectErr == nil && w.cfg.Admit != nil {
		if err := w.cfg.Admit(job); err != nil {
			rejectErr = fmt.Errorf("%w: %w", ErrRejected, err)
		}
	}
	d.id = jobID(msg.Data(), msg.Headers(), d.seq)
	d.log = w.log.With("job", d.id, "attempt", d.attempt)
	d.env = &runEnv{w: w, jobID: d.id, attempt: d.attempt, fenced: new(atomic.Bool)}
	if rejectErr != nil {
		w.reject(d, rejectErr)
		return
	}
	job.ID = d.id
	d.job = job
	w.run(d)
}

// delivery is one delivery of a job message.
type delivery struct {
	msg     jetstream.Msg
	queue   string
	id      string
	attempt int
	// deliveries is the server's delivery count, which bounds the
	// deliveries (MaxDeliver); attempt is one more than an earlier
	// attempt's when the server counted again (see run).
	deliveries int
	seq        uint64
	job        *Job
	env        *runEnv
	claimed    bool // the state store says this attempt runs the job
	started    time.Time
	// published is when the job was published (for the queue wait metric).
	published time.Time
	// log carries the job id and attempt on every line about the delivery.
	log *slog.Logger
	// ended records the end of the attempt in the metrics, once: at the
	// moment its outcome is stored, or as "lost" when nothing was.
	ended func(status string)
}

// jobID names a job: its own id, else the publisher's Nats-Msg-Id, else a
// generated id made of its stream sequence (stable across redeliveries,
// unlike a fresh ULID). Generated ids start with an underscore, which no
// submitted id may (the job schema refuses it), so a job published without
// an id never takes the id of another; a submitted id of that form is not
// used either (its job is dead-lettered under a generated id).
func jobID(data []byte, h nats.Header, seq uint64) string {
	var probe struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(data, &probe) == nil {
		if s, ok := probe.ID.(string); ok && ValidID(s) && !strings.HasPrefix(s, "_") {
			return s
		}
	}
	if s := h.Get(nats.MsgIdHdr); ValidID(s) && !strings.HasPrefix(s, "_") {
		return s
	}
	return GeneratedID(seq)
}

// GeneratedID is the id of the job published without one at stream
// sequence seq of the jobs stream.
func GeneratedID(seq uint64) string { return fmt.Sprintf("_seq-%d", seq) }

// oneLine makes a reason safe for a NATS header.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// reject dead-letters a job refused at the door.
func (w *Worker) reject(d delivery, cause error) {
	d.log.Warn("job rejected", "queue", d.queue, "reason", oneLine(cause.Error()))
	w.deadLetterDelivery(d, cause, true)
}

// refuseBadState dead-letters a job whose state is not a job state (put
// by hand, or by another program): whether the job ran, or runs, cannot
// be told, so it is not run. The bad value is logged and quoted in the
// reason, and replaced by a state of this message so that the job is
// recorded dead like any other (events, status, the copy refused later).
func (w *Worker) refuseBadState(d delivery, bad *badStateError) {
	bucket := w.names.StateBucket()
	cause := fmt.Errorf("%w; so whether the job ran cannot be told, and it was not run: publish it again under a new id, "+
		"or delete the key first (nats kv del %s %s) to reuse this one", bad, bucket, d.id)
	d.log.Error("the job's state is not a job state; dead-lettering the job unrun", "state", bad.Error())
	now := time.Now().UTC()
	st := &State{ID: d.id, Queue: d.queue, Status: StatusQueued, StreamSeq: d.seq, CreatedAt: now}
	if d.job != nil {
		st.Task = summary(d.job.Task)
	}
	// Only once the dead letter is stored: a queued state of this message
	// and a copy that then failed would have had the next delivery run it.
	w.deadLetterDeliveryThen(d, cause, true, func(ctx context.Context) {
		if err := w.states.replaceBad(ctx, bad, st); err != nil {
			// Written meanwhile (fixed by hand); the dead letter stands.
			d.log.Warn("could not replace the bad state", "err", err)
		}
	})
}

// refuseCopy dead-letters a message whose job id another message holds,
// leaving that job's state and events alone.
func (w *Worker) refuseCopy(d delivery, cause error) {
	d.log.Warn("job copy refused", "queue", d.queue, "reason", oneLine(cause.Error()))
	w.deadLetterDelivery(d, cause, false)
}

// deadLetterDelivery copies a delivery to the dead-letter stream with
// cause as its reason and terminates it; markState also records the job
// as dead. A copy that fails hands the delivery back: not copied, so not
// dropped.
func (w *Worker) deadLetterDelivery(d delivery, cause error, markState bool) {
	w.deadLetterDeliveryThen(d, cause, markState, nil)
}

// deadLetterDeliveryThen is deadLetterDelivery calling copied (when not
// nil) once the copy is stored, before the delivery is terminated.
func (w *Worker) deadLetterDeliveryThen(d delivery, cause error, markState bool, copied func(context.Context)) {
	reason := cutReason(oneLine(cause.Error()))
	ctx, cancel, ok := w.copyDead(d, reason)
	defer cancel()
	if !ok {
		return
	}
	if copied != nil {
		copied(ctx)
	}
	if err := d.msg.TermWithReason(reason); err != nil {
		d.log.Warn("term failed", "err", err)
	}
	// Counted before the state is written, so whoever sees the job dead
	// also sees it in the metrics.
	w.cfg.Metrics.rejected(d.queue, cause)
	if markState {
		res := &Result{ID: d.id, Queue: d.queue, Status: StatusDead, Error: reason, Attempt: d.attempt, Worker: w.cfg.WorkerID}
		_ = w.markDeadUnless(ctx, d.env, d.queue, d.seq, res, func(cur *State) bool { return queuedByAnother(cur, d) }) // logged
	}
}

// copyDead copies d to the dead-letter stream with reason. The last
// allowed delivery is kept while the copy cannot be stored (the store
// full): handed back, nothing delivered it again and the job stayed
// queued for ever, with no dead letter. A copy that fails hands the
// delivery back (ok false): not copied, so not dropped. ctx is the last
// try's, for what the caller does next; cancel ends it.
func (w *Worker) copyDead(d delivery, reason string) (ctx context.Context, cancel context.CancelFunc, ok bool) {
	ctx, cancel = opContext()
	err := w.deadLetter(ctx, d.queue, d.id, d.seq, d.msg.Data(), d.msg.Headers(), reason)
	for try := 0; err != nil && w.keepLastDelivery(d, try, err); try++ {
		cancel()
		ctx, cancel = opContext()
		err = w.deadLetter(ctx, d.queue, d.id, d.seq, d.msg.Data(), d.msg.Headers(), reason)
	}
	if err != nil {
		d.log.Error("dead-letter copy failed; handing the job back", "err", err)
		_ = d.msg.NakWithDelay(w.cfg.RetryDelay)
		return ctx, cancel, false
	}
	return ctx, cancel, true
}

// queuedByAnother reports whether cur, the state of the id a refused
// delivery carries, is that of a job queued by a Client with another
// message: not yet claimed (no stream sequence), and recorded for another
// queue, or this message is not the Client's publication (which carries
// Nats-Msg-Id = id; the stream drops any other within the duplicate
// window). A malformed message naming a queued job's id used to mark that
// job dead, and its own message was then refused as a copy: one stray
// publish killed a job it had nothing to do with.
//
// Once the Client has recorded its message's stream sequence in the state
// (Client.recordSeq), any other message is another's.
func queuedByAnother(cur *State, d delivery) bool {
	if cur.Status != StatusQueued || cur.Attempt != 0 {
		return false // claimed before: handed back, not queued by a Client
	}
	if cur.StreamSeq != 0 {
		return cur.StreamSeq != d.seq
	}
	return cur.Queue != d.queue || d.msg.Headers().Get(nats.MsgIdHdr) != d.id
}

// markDead records a dead job's state and terminal event, unless its state
// is already final (another message with the same id finished it).
func (w *Worker) markDead(ctx context.Context, env *runEnv, queue string, seq uint64, res *Result) error {
	return w.markDeadUnless(ctx, env, queue, seq, res, nil)
}

// markDeadUnless is markDead that also leaves alone a state foreign says
// is another message's. A state claimed by another message (its stream
// sequence is not seq: a copy carrying the id of a job that runs, or was
// handed back) is always left alone, and so are its events: the dead
// event goes out only with a state this message wrote, or already holds.
//
// Once the state is final, the progress attempts of this message left
// (journal, checkpoint and their objects) goes, as for a job that
// succeeded or failed: nothing runs the job again (a dead letter
// republished under the same id is refused as reusing it), so the journal
// has no reader; it used to stay until the bucket's TTL. It returns an
// error only when the state could not be stored (errStateUnavailable).
func (w *Worker) markDeadUnless(ctx context.Context, env *runEnv, queue string, seq uint64, res *Result, foreign func(*State) bool) error {
	id := env.jobID
	// The attempt's events are stored before the state says it ended.
	if n, err := env.flush(ctx); err != nil {
		w.log.Error("events not acknowledged", "job", id, "events", n, "err", err)
	}
	now := time.Now().UTC()
	mine, ran := true, false
	// final: this message's state was final already (a redelivery of a
	// job whose term a restarted server lost). survived: the dead event
	// of a state that was lost, which the state is rebuilt from. Either
	// way the job has (or gets back) its one terminal event: a fresh dead
	// event, under this attempt's message id, was a second one.
	var final *State
	var survived, found *Result // found: the lookup's answer, kept for later tries
	looked := false
	_, err := w.states.updateRetried(context.WithoutCancel(ctx), id, func(cur *State) (*State, error) {
		final, survived = nil, nil
		mine = cur == nil || cur.StreamSeq == seq ||
			(cur.StreamSeq == 0 && !cur.Status.Terminal() && (foreign == nil || !foreign(cur)))
		// An attempt of this message claimed the job: it may have
		// journaled (a job refused at the door never ran).
		ran = cur != nil && cur.StreamSeq == seq && cur.Attempt >= 1
		if !mine {
			return nil, nil
		}
		if cur != nil && cur.Status.Terminal() {
			final = cur
			return nil, nil
		}
		st := &State{ID: id, CreatedAt: now}
		if cur != nil {
			st = cur
		}
		st.Queue, st.Status, st.Error, st.Result, st.FinishedAt = queue, StatusDead, res.Error, res, now
		st.Attempt, st.Worker, st.StreamSeq = max(st.Attempt, res.Attempt), w.cfg.WorkerID, seq
		if cur == nil && !looked {
			looked = true
			r, err := w.survivingDeadEvent(ctx, id, queue)
			if err != nil {
				w.log.Warn("dead event lookup failed; publishing one", "job", id, "err", err)
			}
			found = r
		}
		if cur == nil {
			survived = found
		}
		if survived != nil {
			st.Error, st.Result, st.Attempt, st.Worker = survived.Error, survived, survived.Attempt, survived.Worker
		}
		return st, nil
	})
	if err != nil {
		// The journal stays: the state is not final.
		w.log.Error("dead job's state could not be stored", "job", id, "err", err)
		return err
	}
	if !mine {
		w.log.Warn("dead-lettered message carried the id of another message's job; its state and events are left alone",
			"job", id, "stream_seq", seq)
		return nil
	}
	if ran {
		// Before the terminal event, as in settle: whoever sees it sees
		// no progress left.
		w.forgetProgressOf(ctx, env, w.log.With("job", id))
	}
	if final != nil {
		if err := ensureTerminalEvent(ctx, w.topo, w.names, final); err != nil {
			w.log.Error("terminal event check failed", "job", id, "err", err)
		}
		return nil
	}
	if survived != nil {
		w.log.Info("dead job's lost state rebuilt from its dead event", "job", id, "attempt", survived.Attempt)
		return nil
	}
	if err := env.Emit(ctx, EventDead, 0, res); err != nil {
		w.log.Error("event publish failed", "job", id, "err", err)
	}
	if n, err := env.flush(ctx); err != nil {
		w.log.Error("events not acknowledged", "job", id, "events", n, "err", err)
	}
	return nil
}

// survivingDeadEvent returns the result a dead event of job id on queue
// carries, when the events stream has one: the job was marked dead
// before, and its state lost (a SIGKILLed nats-server), not its event.
func (w *Worker) survivingDeadEvent(ctx context.Context, id, queue string) (*Result, error) {
	m, err := w.topo.Events.GetLastMsgForSubject(ctx, w.names.EventSubject(id, EventDead))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up the dead event of %s: %w", id, err)
	}
	var ev Event
	var r Result
	if json.Unmarshal(m.Data, &ev) != nil || ev.JobID != id || json.Unmarshal(ev.Data, &r) != nil ||
		r.ID != id || r.Queue != queue || r.Status != StatusDead {
		return nil, nil // not one this worker published for the job
	}
	return &r, nil
}

// deadLetter copies a job to the dead-letter stream with the reason. The
// copy's Nats-Msg-Id is derived from the job's stream sequence, so a retry
// after a failure does not copy it twice.
func (w *Worker) deadLetter(ctx context.Context, queue, id string, seq uint64, data []byte, h nats.Header, reason string) error {
	m := nats.NewMsg(w.names.DLQSubject(queue))
	m.Data = data
	if len(data)+headerBytes(h)+JobHeaderRoom/2 > int(w.cfg.Conn.MaxPayload()) {
		h = nil // the job itself matters more than its publisher's headers
	}
	// In name order (as renamed): a Nats-Msg-Id renamed joins the values
	// of a Jetagent-Original-Msg-Id already there, the same way each run.
	keys := slices.SortedFunc(maps.Keys(h), func(a, b string) int {
		if c := strings.Compare(publisherHeader(a), publisherHeader(b)); c != 0 {
			return c
		}
		switch { // a Nats-Msg-Id renamed comes after the earlier ids, in any case
		case a == nats.MsgIdHdr:
			return 1
		case b == nats.MsgIdHdr:
			return -1
		}
		return strings.Compare(a, b)
	})
	for _, k := range keys {
		for _, v := range h[k] {
			m.Header.Add(publisherHeader(k), v)
		}
	}
	m.Header.Set("Jetagent-Reason", reason)
	m.Header.Set("Jetagent-Job-Id", id)
	m.Header.Set("Jetagent-Queue", queue)
	m.Header.Set("Jetagent-Stream-Seq", fmt.Sprint(seq))
	m.Header.Set("Jetagent-Worker", w.cfg.WorkerID)
	if len(m.Data)+headerBytes(m.Header)+dlqHeaderSlack > int(w.cfg.Conn.MaxPayload()) {
		// A job near the size limit does not fit beside the reason: its
		// body goes to the transcript bucket, and the dead letter says where.
		name := DeadLetterBodyName(id, seq)
		if err := w.putObject(ctx, name, data); err != nil {
			return fmt.Errorf("dead-letter %s: store the body: %w", id, err)
		}
		ref := DataRef{Bucket: w.names.TranscriptBucket(), Name: name, Bytes: len(data)}
		m.Data, _ = json.Marshal(map[string]any{"job_id": id, "body_ref": ref})
		m.Header.Set("Jetagent-Body-Ref", ref.Bucket+"/"+ref.Name)
	}
	_, err := w.topo.JS.PublishMsg(ctx, m, jetstream.WithMsgID(fmt.Sprintf("%s-%d", w.names.JobsStream(), seq)))
	if err != nil {
		return fmt.Errorf("dead-letter %s: %w", id, err)
	}
	return nil
}

// publisherHeader is the name a publisher's header takes in a dead
// letter: Nats-Msg-Id and names of the worker's own Jetagent-* headers,
// in any case, become Jetagent-Original-*, so only the worker's are read
// by those names. Copied as they came, a publisher's Jetagent-Body-Ref
// pointed a dead-letter reader at another job's object, and a
// "jetagent-reason" stood beside the real Jetagent-Reason for clients
// that fold header case.
func publisherHeader(k string) string {
	const own, orig = "jetagent-", "jetagent-original-"
	switch {
	case k == nats.MsgIdHdr:
		return "Jetagent-Original-Msg-Id"
	case len(k) < len(own) || !strings.EqualFold(k[:len(own)], own):
		return k
	}
	c := textproto.CanonicalMIMEHeaderKey(k) // unchanged when k is no valid header name
	if len(c) >= len(orig) && strings.EqualFold(c[:len(orig)], orig) {
		return "Jetagent-Original-" + c[len(orig):]
	}
	return "Jetagent-Original-" + c[len(own):]
}

// dlqHeaderSlack covers what headerBytes leaves out of a dead letter's
// headers (the NATS/1.0 line, the Nats-Msg-Id the publish adds).
const dlqHeaderSlack = 256

// DeadLetterBodyName is the object holding the body of a dead letter too
// large to carry it beside its reason (see Jetagent-Body-Ref).
func DeadLetterBodyName(jobID string, seq uint64) string { return fmt.Sprintf("%s.dlq.%d", jobID, seq) }

// headerBytes is about what h takes on the wire.
func headerBytes(h nats.Header) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// cancelledBetween is errCancelled for a job cancelled between attempts:
// one ran, so "before it ran" would be false.
type cancelledBetween struct{ after int }

func (c cancelledBetween) Error() string {
	return fmt.Sprintf("cancelled between attempts, after attempt %d", c.after)
}

func (cancelledBetween) Is(target error) bool { return target == errCancelled }

// Claim outcomes that stop a delivery before it runs.
var (
	errFinal     = errors.New("job already finished")
	errCancelled = errors.New("job cancelled before it ran")
	errDuplicate = errors.New("another message with the same job id is running")
	errReused    = errors.New("job id reused")
	errQueued    = errors.New("another message with the same job id is queued")
)

// reusedError refuses d, a message whose id names a job another message
// ran (cur, final). One carrying the job's own Nats-Msg-Id and task is
// most likely its publisher's retry, stored again after a NATS restart:
// the server rebuilds the duplicate window from the messages it holds,
// and a finished job's message is gone. "Submit the job again under
// another id" would then run it twice.
func reusedError(d delivery, cur *State) error {
	if d.msg.Headers().Get(nats.MsgIdHdr) == d.id && cur.Task != "" && !cur.OtherTask(d.job.Task) {
		return fmt.Errorf("%w: job id %s already ended (%s, stream sequence %d); this copy has the job's "+
			"Nats-Msg-Id and task: most likely a publisher's retry that a NATS restart let through the "+
			"duplicate window, so it is not run again", errReused, d.id, cur.Status, cur.StreamSeq)
	}
	return fmt.Errorf("%w: job id %s already ended (%s, stream sequence %d): submit the job "+
		"again under another id", errReused, d.id, cur.Status, cur.StreamSeq)
}

// copyOfRunning is why d, a copy of the job this worker runs from the
// message at seq, is refused. The attempt holds its id until it has
// settled: a copy coming once the state is final (which a watcher may
// have seen) is refused as reusing an ended job's id, as on any other
// worker, not as a copy of a running job.
func (w *Worker) copyOfRunning(d delivery, seq uint64) error {
	ctx, cancel := opContext()
	defer cancel()
	// Read, not get: the attempt's held state is its own to keep.
	if e, err := w.states.kv.Get(ctx, d.id); err == nil {
		var cur State
		if json.Unmarshal(e.Value(), &cur) == nil && cur.Status.Terminal() && cur.StreamSeq == seq {
			return reusedError(d, &cur)
		}
	}
	return fmt.Errorf("%w (stream sequence %d): this copy is not run", errDuplicate, seq)
}

// run claims a job in the state store, runs it and settles the delivery.
func (w *Worker) run(d delivery) {
	jobCtx, cancelJob := context.WithCancelCause(w.jobsCtx)
	defer cancelJob(nil)
	// Register before claiming: a cancel request that races the claim
	// either finds the job here or changed the state the claim reads.
	me := &runningAttempt{cancel: cancelJob, fenced: d.env.fenced, seq: d.seq}
	me.attempt.Store(int64(d.attempt))
	w.mu.Lock()
	other, here := w.running[d.id]
	if !here {
		w.running[d.id] = me
	}
	w.mu.Unlock()
	switch {
	case here && other.seq != d.seq:
		// Another message with the id, on the worker running the job: the
		// claim refuses it so on any other worker. Handed back here, it
		// came back every ack wait until the job ended (or its deliveries
		// ran out under a long one).
		w.refuseCopy(d, w.copyOfRunning(d, other.seq))
		return
	case here:
		// Redelivered to the worker already running it: that attempt holds it.
		d.log.Info("job already running here; handing the delivery back")
		_ = d.msg.NakWithDelay(w.ackWait())
		return
	}
	defer func() {
		w.mu.Lock()
		delete(w.running, d.id)
		w.mu.Unlock()
	}()
	// Transitions of this attempt write against the revision it last
	// read or wrote (stateStore.hold).
	w.states.hold(d.id)
	defer w.states.release(d.id)

	ctx, cancel := opContext()
	owner, err := w.liveOwner(ctx, d)
	var bad *badStateError
	for try := 0; err != nil && !errors.As(err, &bad) && w.keepLastDelivery(d, try, err); try++ {
		cancel()
		ctx, cancel = opContext()
		owner, err = w.liveOwner(ctx, d)
	}
	if bad != nil {
		cancel()
		w.refuseBadState(d, bad)
		return
	}
	if err != nil || owner != nil {
		cancel()
		if err != nil {
			// Doubling per delivery, as JETAGENT_RETRY_DELAY says: at a fixed
			// delay a full store spent a job's deliveries in seconds.
			delay := w.retryDelay(d.deliveries)
			d.log.Error("claim failed; handing the job back", "err", err, "in", delay)
			w.checkAssets() // the state bucket may be gone
			_ = d.msg.NakWithDelay(delay)
			return
		}
		// Redelivered while its attempt is alive (a NATS restart, heartbeats
		// late under load): never two attempts at once.
		d.log.Warn("job held by a live attempt; handing the delivery back",
			"holder", owner.Worker, "holder_attempt", owner.Attempt)
		_ = d.msg.NakWithDelay(w.ackWait())
		return
	}
	now := time.Now().UTC()
	var tookOver, ranBefore bool
	var final *State // the state of a job that ended already
	delivered, attempt := d.attempt, d.attempt
	claimState := func(cur *State) (*State, error) {
		tookOver, attempt, ranBefore, final = false, delivered, false, nil
		st := &State{CreatedAt: now}
		if cur != nil {
			switch {
			case cur.Status.Terminal() && (cur.StreamSeq == 0 || cur.StreamSeq == d.seq):
				ranBefore = cur.StreamSeq == d.seq && cur.Attempt >= 1
				final = cur
				return nil, fmt.Errorf("%w: %s", errFinal, cur.Status)
			case cur.Status.Terminal():
				return nil, reusedError(d, cur)
			case cur.CancelRequested && cur.Attempt > 0:
				// Between attempts: one ran, so "before it ran" would be false.
				return nil, cancelledBetween{cur.Attempt}
			case cur.CancelRequested:
				return nil, errCancelled
			case cur.Status == StatusRunning && cur.StreamSeq != 0 && cur.StreamSeq != d.seq:
				return nil, fmt.Errorf("%w (stream sequence %d): this copy is not run", errDuplicate, cur.StreamSeq)
			// A copy must not take the id of a job waiting on its own
			// message either (queued by a Client on another queue or
			// publication, or handed back): it ran under that id, and
			// the real job's message was then refused as reusing it.
			case queuedByAnother(cur, d):
				return nil, fmt.Errorf("%w (queue %s, submitted with Nats-Msg-Id %s): this copy is not run", errQueued, cur.Queue, d.id)
			case cur.StreamSeq != 0 && cur.StreamSeq != d.seq:
				return nil, fmt.Errorf("%w (stream sequence %d): this copy is not run", errQueued, cur.StreamSeq)
			}
			st = cur
			if cur.StreamSeq == d.seq && cur.Attempt >= attempt {
				// An earlier attempt of this message already had this
				// number: the server lost its record of a delivery (killed
				// before it saved its consumer state, or the consumer was
				// recreated) and counts again. Numbers stay unique per
				// message, or this attempt would skip the journal (a first
				// attempt has none), share its event ids with the earlier
				// one (dropped as duplicates) and ignore its fence notice.
				attempt = cur.Attempt + 1
			}
			tookOver = cur.Status == StatusRunning && (cur.Attempt != attempt || cur.Worker != w.cfg.WorkerID)
		}
		st.Queue, st.Status, st.Attempt, st.Worker = d.queue, StatusRunning, attempt, w.cfg.WorkerID
		st.Task, st.StreamSeq, st.StartedAt = summary(d.job.Task), d.seq, now
		return st, nil
	}
	_, err = w.states.update(ctx, d.id, claimState)
	for try := 0; claimFailed(err) && w.keepLastDelivery(d, try, err); try++ {
		cancel()
		ctx, cancel = opContext()
		_, err = w.states.update(ctx, d.id, claimState)
	}
	cancel()
	switch {
	case errors.Is(err, errFinal):
		// A redelivery of a finished job (its ack was lost): done already.
		if ranBefore {
			// Its journal may be left: a job cancelled by a client while
			// handed back (no worker settled it), or a final state whose
			// write was not confirmed. Its state is final: nothing reads
			// the journal again.
			w.forgetProgressOf(context.Background(), d.env, d.log)
		}
		// Its terminal event may be missing: a worker killed (or the
		// server restarted) between the final state's write and the
		// event's publish, the ack lost with it. Its watchers never saw
		// the job end.
		ectx, ecancel := opContext()
		if err := ensureTerminalEvent(ectx, w.topo, w.names, final); err != nil {
			d.log.Warn("terminal event check failed", "err", err)
		}
		ecancel()
		d.log.Info("not running job", "why", err)
		_ = d.msg.Ack()
		return
	case errors.Is(err, errDuplicate), errors.Is(err, errReused), errors.Is(err, errQueued):
		// Another message with the id of a running or finished job: running
		// it would do that job twice, dropping it would lose it without a
		// word. It goes to the dead-letter stream with the reason (the
		// other job's state is left alone).
		w.refuseCopy(d, err)
		return
	case errors.Is(err, errCancelled):
		w.startAttempt(&d)
		defer d.ended("lost")
		why := "cancelled before it ran"
		if cb := (cancelledBetween{}); errors.As(err, &cb) {
			why = cb.Error()
		}
		w.settle(d, nil, StatusCancelled, why)
		return
	case err != nil:
		delay := w.retryDelay(d.deliveries) // doubling, as for the owner check above
		d.log.Error("claim failed; handing the job back", "err", err, "in", delay)
		_ = d.msg.NakWithDelay(delay)
		return
	}

	if attempt != delivered {
		d.log.Warn("the server delivered the job with a count an earlier attempt had; running it as the next attempt",
			"delivery_count", delivered, "as_attempt", attempt)
		d.attempt, d.env.attempt = attempt, attempt
		d.log = w.log.With("job", d.id, "attempt", attempt)
		me.attempt.Store(int64(attempt))
	}
	d.claimed = true
	if _, rev, ok := w.states.holding(d.id); ok {
		me.claimRev.Store(rev)
	}
	me.claimed.Store(true)
	if tookOver {
		w.fenceOthers(d) // an attempt that did not answer may be alive after all
	}
	w.startAttempt(&d)
	defer d.ended("lost") // whichever way the attempt ends, it ends once
	env := d.env
	timeout, notes := w.applied(d.job)
	started := map[string]any{
		"attempt": d.attempt, "worker": w.cfg.WorkerID, "queue": d.queue, "timeout_ms": timeout.Milliseconds(),
	}
	if len(notes) > 0 {
		started["notes"] = notes
	}
	if err := env.Emit(jobCtx, EventStarted, 0, started); err != nil {
		d.log.Warn("event publish failed", "err", err)
	}
	d.log.Info("job started", "queue", d.queue)
	for _, n := range notes {
		d.log.Warn("job setting not applied as given", "note", n)
	}

	errTimeout := fmt.Errorf("job timed out after %s", timeout)
	runCtx, cancelRun := context.WithTimeoutCause(withMessageHeader(jobCtx, d.msg.Headers()), timeout, errTimeout)
	hbDone := w.heartbeat(d, me)
	out, runErr := w.callRunner(runCtx, d.job, env)
	cause := context.Cause(runCtx)
	cancelRun()
	hbDone()

	switch {
	case me.fenced.Load():
		// Another attempt may hold the job: touch neither its state nor
		// the delivery (d.ended records the attempt as lost).
		d.log.Warn("attempt fenced; leaving the job", "why", context.Cause(jobCtx))
	case runErr == nil:
		w.settle(d, out, StatusSucceeded, "")
	case errors.Is(cause, errCancelRequested):
		w.settle(d, out, StatusCancelled, "cancelled on request")
	case errors.Is(cause, ErrShutdown):
		w.handBack(d, out, EventRequeued, fmt.Sprintf("handed back: worker %s shut down", w.cfg.WorkerID), w.cfg.RequeueDelay)
	case errors.Is(cause, errTimeout):
		why := errTimeout.Error()
		if se := (*agentloop.StoppedError)(nil); errors.As(runErr, &se) && se.While != "" {
			why += " while " + oneLine(se.While) // which of the model or a tool took the time
		}
		w.settle(d, out, StatusFailed, why)
	case IsRetryable(runErr) && d.deliveries < w.paceOf(d.queue).maxDeliver:
		// The provider's Retry-After when it asked for longer: sooner, the
		// next delivery is refused too and the job's deliveries run out
		// within the wait.
		w.handBack(d, out, EventRetry, oneLine(runErr.Error()), max(w.retryDelay(d.attempt), RetryAfterOf(runErr)))
	case IsRetryable(runErr):
		w.exhausted(d, runErr)
	default:
		w.settle(d, out, StatusFailed, oneLine(runErr.Error()))
	}
}

// claimFailed says whether a claim's state write failed to reach or fit
// the store, rather than deciding not to run the delivery.
func claimFailed(err error) bool {
	for _, decided := range []error{errFinal, errDuplicate, errReused, errQueued, errCancelled} {
		if errors.Is(err, decided) {
			return false
		}
	}
	return err != nil
}

// keepLastDelivery keeps a job's last allowed delivery while what it needs
// written cannot be (the store full, "insufficient resources", or away):
// the delivery is marked in progress every heartbeat for the try-th retry
// delay, then true says to try again. Handed back, the last delivery was
// the end of the job: only the server's max-deliveries advisory was left,
// and a full store refuses that too, so the job stayed queued or running
// for ever, with no dead letter. It reports false, to hand the delivery
// back as before, for an earlier delivery and once running jobs are
// stopped (the shutdown grace is over).
func (w *Worker) keepLastDelivery(d delivery, try int, err error) bool {
	p := w.paceOf(d.queue)
	if d.deliveries < p.maxDeliver || w.jobsCtx.Err() != nil {
		return false
	}
	wait := w.retryDelay(try + 1)
	d.log.Error("the job's last delivery cannot be settled; keeping it and trying again", "err", err, "in", wait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	beat := time.NewTicker(p.heartbeat)
	defer beat.Stop()
	_ = d.msg.InProgress()
	for {
		select {
		case <-w.jobsCtx.Done():
			return false
		case <-beat.C:
			if err := d.msg.InProgress(); err != nil {
				d.log.Warn("heartbeat failed", "err", err)
			}
		case <-timer.C:
			return true
		}
	}
}

// callRunner runs the job, turning a panic into a failure.
func (w *Worker) callRunner(ctx context.Context, job *Job, env RunEnv) (out *Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("runner panicked: %v", r)
		}
	}()
	out, err = w.cfg.Runner.Run(ctx, job, env)
	if err == nil && out == nil {
		err = errors.New("runner returned no outcome")
	}
	return out, err
}

// heartbeat marks the delivery in progress until the returned stop is
// called, and fences the attempt (see fence.go) when its heartbeats could
// not be delivered for nearly the ack wait, or when, connected again after
// a disconnection, the job's state no longer names it.
func (w *Worker) heartbeat(d delivery, me *runningAttempt) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	// The server may redeliver once the shortest ack wait has passed since
	// the last heartbeat it got: stop half a heartbeat before. The pace
	// follows the queue's consumer, which another worker may have given
	// another ack wait (pace.go).
	changed := w.paceChanged()
	p := w.paceOf(d.queue)
	limit := p.ackWait - p.heartbeat/2
	wg.Go(func() {
		t := time.NewTicker(p.heartbeat)
		defer t.Stop()
		deadline := time.NewTimer(limit)
		defer deadline.Stop()
		deadlineAt := time.Now().Add(limit)
		wasCut := false
		for {
			select {
			case <-done:
				return
			case <-deadline.C:
				me.fence(fmt.Errorf("no heartbeat could be delivered for %s (ack wait %s)", limit, p.ackWait))
				return
			case <-changed:
				changed = w.paceChanged()
				now := w.paceOf(d.queue)
				if now == p {
					continue
				}
				// A beat at once: the server's wait may be shorter now than
				// the time since the last. The new limit counts from now: a
				// beat older than it is no reason to fence, as connected
				// the attempt answers the liveness request of a redelivery.
				p, limit = now, now.ackWait-now.heartbeat/2
				t.Reset(p.heartbeat)
				deadline.Reset(limit)
				deadlineAt = time.Now().Add(limit)
			case <-t.C:
			}
			connected := w.cfg.Conn.IsConnected()
			if !connected {
				wasCut = true
				continue
			}
			if wasCut {
				wasCut = false
				if ok, err := w.stillOwned(d, me.claimRev.Load()); err == nil && !ok {
					me.fence(errors.New("the job's state names another attempt"))
					return
				}
			}
			send, delivered := true, true
			if w.hbFault != nil {
				send, delivered = w.hbFault()
			}
			if send {
				// The wait ends by the deadline: blocked in it, the loop
				// would fence late, after the server redelivered.
				left := time.Until(deadlineAt)
				if left <= 0 {
					me.fence(fmt.Errorf("no heartbeat could be delivered for %s (ack wait %s)", limit, p.ackWait))
					return
				}
				if err := confirmProgress(w.cfg.Conn, d.msg, min(p.heartbeat/2, 5*time.Second, left)); err != nil {
					d.log.Warn("heartbeat failed", "err", err)
					delivered = false
				}
			}
			if delivered {
				deadline.Reset(limit)
				deadlineAt = time.Now().Add(limit)
				// A take-over's fence notice is one core message: lost
				// while the network was split (this worker's node cut off,
				// its consumer leader still answering heartbeats until it
				// noticed it lost its quorum), the attempt ran on beside
				// the new one once the network healed. Its state says so.
				if ok, err := w.stillOwned(d, me.claimRev.Load()); err == nil && !ok {
					me.fence(errors.New("the job's state names another attempt"))
					return
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// confirmProgress marks msg in progress and waits, at most timeout, for
// the consumer's leader to confirm it: the server answers an ack sent as
// a request once it processed it. A flush confirmed only that the node
// the worker is connected to read it: cut off from the others (a network
// partition) that node took every heartbeat while the leader, on the
// other side, delivered the job again, and the attempt never fenced
// itself; once the network healed it went on beside the new one.
func confirmProgress(nc *nats.Conn, msg jetstream.Msg, timeout time.Duration) error {
	if msg.Reply() == "" {
		return errors.New("the delivery has no ack subject")
	}
	if _, err := nc.Request(msg.Reply(), []byte("+WPI"), timeout); err != nil {
		return fmt.Errorf("in-progress ack not confirmed by the consumer: %w", err)
	}
	return nil
}

// ackWait is the shortest time the server waits for a heartbeat.
func (w *Worker) ackWait() time.Duration {
	d, _ := w.cfg.Topology.shortestAckWait()
	return d
}

// retryDelay is the delay before the given attempt's retry: RetryDelay,
// doubling per attempt up to RetryDelayMax, within 20% (jitter). The
// multiplier is set: the library's default, 1.5, made the documented
// doubling (JETAGENT_RETRY_DELAY) grow by half.
func (w *Worker) retryDelay(attempt int) time.Duration {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.RandomizationFactor = w.cfg.RetryDelay, w.cfg.RetryDelayMax, 0.2
	b.Multiplier = 2
	b.MaxElapsedTime = 0
	b.Reset()
	d := b.NextBackOff()
	for range attempt - 1 {
		d = b.NextBackOff()
	}
	return d
}

// owned is the CAS guard of every transition out of running: only the
// attempt that claimed the job may move it on. A worker whose delivery was
// taken over (it missed its heartbeats) must not write over the new owner.
func (w *Worker) owned(d delivery, cur *State) error {
	if cur == nil || cur.Status != StatusRunning || cur.Attempt != d.attempt || cur.Worker != w.cfg.WorkerID {
		return fmt.Errorf("%w: job %s is no longer held by attempt %d on this worker", ErrConflict, d.id, d.attempt)
	}
	return nil
}

// startAttempt records the start of an attempt and makes its d.ended.
func (w *Worker) startAttempt(d *delivery) {
	d.started = time.Now()
	w.cfg.Metrics.jobStarted(d.queue)
	if d.attempt == 1 {
		w.cfg.Metrics.queueWaited(d.queue, d.started.Sub(d.published))
	}
	var once sync.Once
	queue, started := d.queue, d.started
	d.ended = func(status string) {
		once.Do(func() { w.cfg.Metrics.attemptEnded(queue, status, time.Since(started)) })
	}
}

// settle ends a job for good: transcript, state, terminal event, ack.
func (w *Worker) settle(d delivery, out *Outcome, status Status, errText string) {
	ctx, cancel := opContext()
	defer func() { cancel() }() // the last context (renewed after the flush)
	finished := time.Now()
	res := &Result{
		ID: d.id, Queue: d.queue, Status: status, Error: errText, Attempt: d.attempt,
		Worker: w.cfg.WorkerID, DurationMS: finished.Sub(d.started).Milliseconds(), Metadata: d.job.Metadata,
	}
	if out != nil {
		u := out.Usage
		res.Answer, res.Rounds, res.StopReason, res.Mode, res.Usage = out.Answer, out.Rounds, out.StopReason, string(out.Mode), &u
		if status != StatusSucceeded {
			res.Answer = "" // a partial answer is in the transcript
		}
	}
	// The transcripts and the attempt's events are stored before the
	// state says the job ended, their acks awaited together.
	var transcripts func(context.Context) error
	if out != nil && len(out.Messages) > 0 {
		transcripts = w.storeTranscripts(d, out, finished)
	}
	w.flushEvents(ctx, d)
	// Events the stream refuses (full) hold the flush for its whole
	// bound: what follows gets its own, or the transcripts (and a long
	// answer's object) failed at once on the spent context.
	cancel()
	ctx, cancel = opContext()
	if transcripts != nil {
		if err := transcripts(ctx); err != nil {
			d.log.Error("transcript store failed", "err", err)
			w.checkAssets()
			res.TranscriptError = cutReason(oneLine(err.Error()))
		} else {
			res.Transcript = TranscriptName(d.id)
		}
	}
	// seen is the state a write that was not made found (for the log);
	// rebuilt, that the attempt's state was gone.
	var seen *State
	rebuilt := false
	write := func() error {
		// Tried again within its bound (updateRetried): a NATS restart
		// that swallowed one request used to leave the job to its ack
		// wait, logged as settled elsewhere.
		_, err := w.states.updateRetried(context.WithoutCancel(ctx), d.id, func(cur *State) (*State, error) {
			seen = cur
			if cur != nil && cur.Status == status && cur.Attempt == d.attempt && cur.Worker == w.cfg.WorkerID &&
				cur.FinishedAt.Equal(finished.UTC()) {
				return nil, nil // an earlier try stored it; its answer was lost
			}
			rebuilt = false
			if d.claimed && cur == nil {
				// The state is gone under the attempt that claimed it: purged
				// (nats kv purge), or a NATS server back without its store.
				// The outcome gets a new state: it was logged as "held or
				// settled by another attempt" and lost, the events alone
				// showing it (a later attempt makes a state of its own).
				cur, rebuilt = w.stateAgain(d), true
			}
			if d.claimed {
				if err := w.owned(d, cur); err != nil {
					return nil, err
				}
			} else if cur == nil || cur.Status.Terminal() {
				return nil, fmt.Errorf("%w: job %s has no state to cancel or is final", ErrConflict, d.id)
			}
			cur.Status, cur.Error, cur.Result, cur.FinishedAt = status, res.Error, res, finished.UTC()
			cur.Attempt, cur.Worker = d.attempt, w.cfg.WorkerID
			if b, err := json.Marshal(cur); err == nil && len(b) > w.payloadBudget() && res.AnswerRef == nil && res.ErrorRef == nil {
				return nil, errStateTooLarge
			}
			return cur, nil
		})
		return err
	}
	// The last allowed delivery is kept while the store cannot take the
	// state (full, or away), as its claim is (keepLastDelivery): handed
	// back, nothing delivered it again, and the job stayed running for
	// ever with its outcome lost.
	var err error
	for try := 0; ; try++ {
		if try > 0 {
			cancel()
			ctx, cancel = opContext()
		}
		err = write()
		if w.overBadState(ctx, d, err) {
			err = write()
		}
		if errors.Is(err, errStateTooLarge) {
			// A long answer or error: store it beside the transcript and keep
			// a preview with a reference, or the state could never be written.
			if oerr := w.offloadResult(ctx, res); oerr != nil {
				if w.keepLastDelivery(d, try, oerr) {
					continue
				}
				d.log.Error("result store failed; handing the job back", "err", oerr)
				_ = d.msg.NakWithDelay(w.cfg.RetryDelay)
				return
			}
			errText = res.Error
			err = write()
		}
		if !errors.Is(err, errStateUnavailable) || !w.keepLastDelivery(d, try, err) {
			break
		}
	}
	switch {
	case errors.Is(err, errStateUnavailable):
		// Not stored (or stored and not confirmed: the next delivery then
		// finds it final and acks it). The delivery goes back at once
		// rather than after its ack wait; the next attempt resumes from
		// the journal, which is kept.
		d.log.Error("final state could not be stored; handing the job back", "status", status, "err", err)
		w.checkAssets()
		if nerr := d.msg.NakWithDelay(w.cfg.RetryDelay); nerr != nil {
			d.log.Warn("nak failed; the job comes back after its ack wait", "err", nerr)
		}
		return
	case err != nil:
		// The state names another attempt, or is final already: whoever
		// holds the job settles it; the delivery is theirs.
		attrs := []any{"status", status, "err", err}
		if seen != nil {
			attrs = append(attrs, "state", seen.Status, "state_attempt", seen.Attempt, "state_worker", seen.Worker)
		}
		d.log.Warn("job held or settled by another attempt; leaving it", attrs...)
		return
	}
	if rebuilt {
		d.log.Warn("the job's state was gone (purged, its bucket removed, or the NATS server lost its store); stored again with the outcome", "status", status)
	}
	d.ended(string(status))
	// Only now that the state is final: were the state write to fail after
	// the journal went, the next attempt would start over and repeat every
	// call. Before the terminal event, so whoever sees it sees no progress
	// left (a job that journaled nothing costs no round trip here).
	w.forgetProgress(ctx, d, d.env.checkpointObject.Load())
	if err := d.env.Emit(ctx, string(status), 0, res); err != nil {
		d.log.Error("event publish failed", "err", err)
		w.checkAssets() // the events stream may be gone
	}
	// The terminal event is published before the ack, on the same
	// connection, so the server stores it first. Neither holds the slot:
	// an ack that is lost costs nothing (the state is final, so a
	// redelivery is acked without running), and the terminal event's ack
	// is awaited (re-sent if need be) off the slot, the worker waiting for
	// it at shutdown like for a job.
	if err := d.msg.Ack(); err != nil {
		d.log.Warn("ack failed", "err", err)
	}
	w.jobs.Add(1)
	go func() {
		defer w.jobs.Done()
		w.flushEvents(context.Background(), d)
	}()
	attrs := []any{"status", status}
	if errText != "" { // not error="" on every success
		attrs = append(attrs, "error", errText)
	}
	d.log.Info("job finished", attrs...)
}

// storeTranscripts starts storing the raw and the reflected transcript,
// objects <job_id>.raw and <job_id> of the transcript bucket; wait returns
// once both are stored. A first attempt publishes them asynchronously
// (startPutObject: no object of those names exists yet), so their acks
// are awaited with the events'; a later attempt, or a first whose
// publishes failed, uses ObjectStore.Put, which replaces what an earlier
// attempt may have stored.
func (w *Worker) storeTranscripts(d delivery, out *Outcome, finished time.Time) (wait func(context.Context) error) {
	t := Transcript{
		JobID: d.id, Attempt: d.attempt, Worker: w.cfg.WorkerID, Model: out.Model, Mode: string(out.Mode),
		Rounds: out.Rounds, StopReason: out.StopReason, Usage: out.Usage,
		StartedAt: d.started.UTC(), FinishedAt: finished.UTC(), DurationMS: finished.Sub(d.started).Milliseconds(),
		Messages: out.Messages, Records: out.Records,
	}
	raw, err := json.Marshal(t)
	if err != nil {
		return func(context.Context) error { return err }
	}
	// A Runner that does not reflect leaves Reflected nil: the <job_id>
	// object then holds the raw messages and says so.
	refl := raw
	if out.Reflected != nil {
		t.Reflected, t.Messages = true, out.Reflected
		if refl, err = json.Marshal(t); err != nil {
			return func(context.Context) error { return err }
		}
	}
	objs := []struct {
		name string
		data []byte
	}{{RawTranscriptName(d.id), raw}, {TranscriptName(d.id), refl}}
	var puts []*objectPut
	if d.attempt == 1 {
		for _, o := range objs {
			p, err := w.startPutObject(o.name, o.data)
			if err != nil {
				break
			}
			puts = append(puts, p)
		}
	}
	return func(ctx context.Context) error {
		stored := len(puts) == len(objs)
		for i, p := range puts {
			// One try's bound: an ack lost with its request must leave
			// putObject time to store the object again.
			tctx, cancel := context.WithTimeout(ctx, objectTryTimeout(len(objs[i].data)))
			err := p.wait(tctx)
			cancel()
			if err != nil {
				d.log.Warn("transcript publish failed; storing it again", "err", err)
				stored = false
			}
		}
		if stored {
			return nil
		}
		for _, o := range objs {
			if err := w.putObject(ctx, o.name, o.data); err != nil {
				return err
			}
		}
		return nil
	}
}

// stateAgain is the state of a job claimed by d whose state is gone
// under it, as d's claim wrote it.
func (w *Worker) stateAgain(d delivery) *State {
	st := &State{ID: d.id, Queue: d.queue, Status: StatusRunning, Attempt: d.attempt, Worker: w.cfg.WorkerID,
		StreamSeq: d.seq, CreatedAt: d.started.UTC(), StartedAt: d.started.UTC()}
	if d.job != nil {
		st.Task = summary(d.job.Task)
	}
	return st
}

// overBadState replaces the state of a job d claimed with the claim's
// (stateAgain) when err says it is not a job state (overwritten by hand
// while the job ran), and reports whether it did: the transition is then
// tried again. Left, the outcome was lost as another attempt's.
func (w *Worker) overBadState(ctx context.Context, d delivery, err error) bool {
	var bad *badStateError
	if !d.claimed || !errors.As(err, &bad) {
		return false
	}
	if rerr := w.states.replaceBad(ctx, bad, w.stateAgain(d)); rerr != nil {
		d.log.Warn("could not replace the job's state, which is not a job state", "state", bad.Error(), "err", rerr)
		return false
	}
	d.log.Error("the job's state was overwritten with one that is not a job state; replaced by this attempt's", "state", bad.Error())
	return true
}

// handBack returns a running job to the queue (state queued) after delay.
// A job whose cancel was requested is settled cancelled instead: it has
// stopped, as asked (a cancel that came once the shutdown grace was over
// found its context already ended), and requeued it would wait, queued
// and unrun, for another worker to say so.
func (w *Worker) handBack(d delivery, out *Outcome, eventType, why string, delay time.Duration) {
	ctx, cancel := opContext()
	defer cancel()
	var seen *State
	rebuilt := false
	handBack := func(cur *State) (*State, error) {
		seen = cur
		if cur != nil && cur.Status == StatusQueued && cur.Error == why && cur.Attempt == d.attempt &&
			cur.Worker == w.cfg.WorkerID && cur.StreamSeq == d.seq {
			return nil, nil // an earlier try stored it; its answer was lost
		}
		rebuilt = false
		if d.claimed && cur == nil {
			// Gone under this attempt (as in settle): taken for another
			// attempt's hold, the delivery was left without its retry
			// event, to come back only after its ack wait. Seen when the
			// worker made a removed state bucket again while this write
			// was being retried.
			cur, rebuilt = w.stateAgain(d), true
		}
		if err := w.owned(d, cur); err != nil {
			return nil, err
		}
		if cur.CancelRequested {
			return nil, errCancelRequested
		}
		cur.Status, cur.Error = StatusQueued, why
		return cur, nil
	}
	_, err := w.states.updateRetried(context.WithoutCancel(ctx), d.id, handBack)
	if w.overBadState(ctx, d, err) {
		_, err = w.states.updateRetried(context.WithoutCancel(ctx), d.id, handBack)
	}
	switch {
	case errors.Is(err, errCancelRequested):
		w.settle(d, out, StatusCancelled, "cancelled on request")
		return
	case errors.Is(err, errStateUnavailable):
		// The state still says running (or queued, unconfirmed): the
		// next delivery asks this worker, which no longer runs the job,
		// and takes it over. Handed back all the same.
		d.log.Error("state could not be stored; handing the job back all the same", "why", why, "err", err)
		if eventType == EventRequeued {
			d.ended("requeued")
		} else {
			d.ended("retry")
		}
		// The events still go out first, as below: the state's store may
		// be the only one away, and the attempt's last events (its
		// hand-back's among them) were dropped without a word. A bound of
		// their own: the state's tries spent ctx's.
		ectx, ecancel := opContext()
		defer ecancel()
		if err := d.env.Emit(ectx, eventType, 0, map[string]any{"reason": why, "delay_ms": delay.Milliseconds()}); err != nil {
			d.log.Error("event publish failed", "err", err)
		}
		w.flushEvents(ectx, d)
		if nerr := d.msg.NakWithDelay(delay); nerr != nil {
			d.log.Warn("nak failed; the job comes back after its ack wait", "err", nerr)
		}
		return
	case err != nil:
		attrs := []any{"err", err}
		if seen != nil {
			attrs = append(attrs, "state", seen.Status, "state_attempt", seen.Attempt, "state_worker", seen.Worker)
		}
		d.log.Warn("job held or settled by another attempt; leaving it", attrs...)
		return
	}
	if rebuilt {
		d.log.Warn("the job's state was gone (purged, its bucket removed, or the NATS server lost its store); stored again, queued", "why", why)
	}
	if eventType == EventRequeued {
		d.ended("requeued")
	} else {
		d.ended("retry")
	}
	if err := d.env.Emit(ctx, eventType, 0, map[string]any{"reason": why, "delay_ms": delay.Milliseconds()}); err != nil {
		d.log.Error("event publish failed", "err", err)
	}
	w.flushEvents(ctx, d)
	if err := d.msg.NakWithDelay(delay); err != nil {
		d.log.Warn("nak failed; the job comes back after its ack wait", "err", err)
	}
	d.log.Info("job handed back", "why", why, "delay", delay)
}

// exhausted dead-letters a job whose last allowed attempt failed with a
// retryable error.
func (w *Worker) exhausted(d delivery, runErr error) {
	reason := cutReason(oneLine(fmt.Sprintf("max deliveries (%d) exhausted: %v", w.paceOf(d.queue).maxDeliver, runErr)))
	ctx, cancel, ok := w.copyDead(d, reason)
	defer cancel()
	if !ok {
		return
	}
	_ = d.msg.TermWithReason(reason)
	res := &Result{ID: d.id, Queue: d.queue, Status: StatusDead, Error: reason, Attempt: d.attempt,
		Worker: w.cfg.WorkerID, DurationMS: time.Since(d.started).Milliseconds(), Metadata: d.job.Metadata}
	d.ended(string(StatusDead))
	_ = w.markDead(ctx, d.env, d.queue, d.seq, res) // logged; the message is terminated either way
}

// onCancel cancels a job running here; other workers stay silent, so a
// requester that gets a reply knows the job was reached.
func (w *Worker) onCancel(m *nats.Msg) {
	id := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	w.mu.Lock()
	r, ok := w.running[id]
	w.mu.Unlock()
	if !ok {
		return
	}
	if by := m.Header.Get(fenceHeader); by != "" {
		// Another attempt took the job over (see fence.go).
		if mine := r.attempt.Load(); by != strconv.FormatInt(mine, 10) {
			w.log.Warn("job taken over; fencing this attempt", "job", id, "attempt", mine, "by", by)
			r.fence(fmt.Errorf("attempt %s took the job over", by))
		}
		return
	}
	r.cancel(errCancelRequested)
	w.log.Info("cancel requested", "job", id)
	if m.Reply != "" {
		b, _ := json.Marshal(map[string]string{"job_id": id, "worker": w.cfg.WorkerID})
		_ = m.Respond(b)
	}
}
