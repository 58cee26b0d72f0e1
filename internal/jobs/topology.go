package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/cfgerr"
)

// Topology defaults.
const (
	DefaultDuplicateWindow = time.Hour
	DefaultEventsMaxAge    = 24 * time.Hour
	DefaultAdvisoryMaxAge  = 7 * 24 * time.Hour
	DefaultAckWait         = 30 * time.Second
	DefaultMaxDeliver      = 5
	// stateHistory keeps a few revisions per job: enough to see how a job
	// moved (nats kv history AGENT_STATE <id>) without growing without bound.
	stateHistory = 10
	// journalTTL bounds how long a journal entry outlives a job whose
	// purge failed; far longer than any job's retries.
	journalTTL = 7 * 24 * time.Hour
)

// ErrTopology: a stream, bucket or consumer exists with settings that
// cannot be changed in place.
var ErrTopology = errors.New("jobs: conflicting topology")

// TopologyConfig is the shape of the JetStream assets. Every worker of a
// deployment should use the same settings; a worker that finds different
// mutable settings updates them and logs what it changed.
type TopologyConfig struct {
	Names Names
	// Queues gets one durable pull consumer each (default: DefaultQueue).
	Queues []string
	// Replicas of every stream and bucket (1 on a single server, 3 on a cluster).
	Replicas int
	// DuplicateWindow: a job id published twice within it is queued once.
	DuplicateWindow time.Duration
	// EventsMaxAge: how long events are kept.
	EventsMaxAge time.Duration
	// DLQMaxAge: how long dead letters are kept (0: until purged).
	DLQMaxAge time.Duration
	// AckWait: how long a delivery may go without an ack or heartbeat
	// before the server redelivers it (a crashed worker's job comes back
	// after this).
	AckWait time.Duration
	// MaxDeliver bounds deliveries of one job; then it is dead-lettered.
	MaxDeliver int
	// BackOff, when set, replaces AckWait for successive redeliveries after
	// ack timeouts (the server's own backoff); at most MaxDeliver entries.
	BackOff []time.Duration
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c TopologyConfig) WithDefaults() TopologyConfig {
	if c.Names.Prefix == "" {
		c.Names.Prefix = DefaultPrefix
	}
	if len(c.Queues) == 0 {
		c.Queues = []string{DefaultQueue}
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = DefaultDuplicateWindow
	}
	if c.EventsMaxAge == 0 {
		c.EventsMaxAge = DefaultEventsMaxAge
	}
	if c.AckWait == 0 {
		c.AckWait = DefaultAckWait
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = DefaultMaxDeliver
	}
	return c
}

// Validate checks c as given (apply WithDefaults first for zero fields).
// Errors are *cfgerr.FieldError naming the field, wrapping ErrConfig.
func (c TopologyConfig) Validate() error {
	bad := func(field, name, format string, a ...any) error {
		return cfgerr.Field(ErrConfig, field, name, format, a...)
	}
	if !prefixRE.MatchString(c.Names.Prefix) {
		return bad("Names.Prefix", "prefix", "%q must match %s", c.Names.Prefix, prefixRE)
	}
	if len(c.Queues) == 0 {
		return bad("Queues", "", "name at least one queue")
	}
	for _, q := range c.Queues {
		switch {
		case q == "":
			// "a,,b" or a comma at an end: `"" must match ...` named no cause.
			return bad("Queues", "queue", "an empty name (two commas in a row, or one at an end?) must match %s", queueRE)
		case !ValidQueue(q):
			return bad("Queues", "queue", "%q must match %s", q, queueRE)
		}
	}
	switch {
	case c.Replicas < 1 || c.Replicas > 5:
		return bad("Replicas", "replicas", "must be 1..5 (got %d)", c.Replicas)
	case c.DuplicateWindow < minStreamWindow:
		// The server's own least; below it the worker failed at its start
		// with the server's "duplicates window needs to be >= 100ms".
		return bad("DuplicateWindow", "duplicate window", "must be at least %s (got %s)", minStreamWindow, c.DuplicateWindow)
	case c.EventsMaxAge < minStreamWindow:
		return bad("EventsMaxAge", "events max age", "must be at least %s (got %s)", minStreamWindow, c.EventsMaxAge)
	case c.DLQMaxAge < 0:
		return bad("DLQMaxAge", "dead-letter max age", "must not be negative (got %s)", c.DLQMaxAge)
	case c.DLQMaxAge > 0 && c.DLQMaxAge < minStreamWindow:
		return bad("DLQMaxAge", "dead-letter max age", "must be 0 (kept until purged) or at least %s (got %s)",
			minStreamWindow, c.DLQMaxAge)
	case c.AckWait < time.Second:
		return bad("AckWait", "ack wait", "must be at least 1s (got %s)", c.AckWait)
	case c.AckWait > maxAckWait:
		// Heartbeats keep a long job alive whatever the ack wait: a longer
		// one only delays a crashed worker's jobs (1000000h: for ever).
		return bad("AckWait", "ack wait", "must be at most %s: it is how long a crashed worker's job waits to run again (got %s)",
			maxAckWait, c.AckWait)
	case c.MaxDeliver < 1:
		return bad("MaxDeliver", "max deliver", "must be at least 1 (got %d)", c.MaxDeliver)
	case len(c.BackOff) > c.MaxDeliver:
		return cfgerr.Fields(ErrConfig, []string{"BackOff", "MaxDeliver"}, "",
			"%d backoff steps exceed max deliver %d", len(c.BackOff), c.MaxDeliver)
	}
	for _, d := range c.BackOff {
		if d < time.Second {
			return bad("BackOff", "backoff steps", "must be at least 1s (got %s)", d)
		}
		if d > maxAckWait {
			return bad("BackOff", "backoff steps", "must be at most %s (got %s)", maxAckWait, d)
		}
	}
	return nil
}

// maxAckWait bounds the ack wait and backoff steps: the longest a job
// of a crashed worker waits for its next delivery.
const maxAckWait = 24 * time.Hour

// minStreamWindow is the least duplicate window and max age the NATS
// server accepts for a stream.
const minStreamWindow = 100 * time.Millisecond

// dlqDuplicates is the dead-letter stream's duplicate window: 2 minutes,
// or its max age when that is shorter (0: kept until purged).
func dlqDuplicates(maxAge time.Duration) time.Duration {
	if maxAge > 0 {
		return min(2*time.Minute, maxAge)
	}
	return 2 * time.Minute
}

// shortestAckWait is the shortest time the server waits for an ack or a
// heartbeat: with BackOff set, its steps replace AckWait.
func (c TopologyConfig) shortestAckWait() (d time.Duration, field string) {
	d, field = c.AckWait, "AckWait"
	for _, b := range c.BackOff {
		if b < d {
			d, field = b, "BackOff"
		}
	}
	return d, field
}

// Topology holds handles on the JetStream assets.
type Topology struct {
	JS          jetstream.JetStream
	Jobs        jetstream.Stream
	Events      jetstream.Stream
	DLQ         jetstream.Stream
	Advisories  jetstream.Stream
	State       jetstream.KeyValue
	Transcripts jetstream.ObjectStore
	// Journal holds call journals and checkpoints (JournalBucket).
	Journal jetstream.KeyValue
	// JournalStream is the stream behind Journal, for purges by job.
	JournalStream jetstream.Stream
	// Consumers maps each queue to its shared durable pull consumer.
	Consumers        map[string]jetstream.Consumer
	AdvisoryConsumer jetstream.Consumer
}

// EnsureTopology creates the streams, buckets and consumers, or checks
// and updates them when they exist. It is idempotent and safe to run from
// many workers at once. A setting that cannot change in place (retention,
// storage) fails with ErrTopology naming the asset and both values; a
// mutable setting that differs is updated and reported through logf.
func EnsureTopology(ctx context.Context, js jetstream.JetStream, cfg TopologyConfig, logf func(format string, args ...any)) (*Topology, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	n := cfg.Names
	t := &Topology{JS: js, Consumers: map[string]jetstream.Consumer{}}
	var err error
	streams := []struct {
		dst *jetstream.Stream
		cfg jetstream.StreamConfig
	}{
		{&t.Jobs, jetstream.StreamConfig{
			Name: n.JobsStream(), Description: "jetagent jobs, one subject per queue",
			Subjects: []string{n.JobsSubject("*")}, Retention: jetstream.WorkQueuePolicy,
			Storage: jetstream.FileStorage, Replicas: cfg.Replicas, Duplicates: cfg.DuplicateWindow,
			// An operator's max_msgs or max_bytes then refuses new jobs
			// (the publisher is told); discarding old dropped queued ones
			// without a word, their states left queued for ever.
			Discard: jetstream.DiscardNew,
		}},
		{&t.Events, jetstream.StreamConfig{
			Name: n.EventsStream(), Description: "jetagent job events",
			Subjects: []string{n.allEvents()}, Retention: jetstream.LimitsPolicy,
			Storage: jetstream.FileStorage, Replicas: cfg.Replicas, MaxAge: cfg.EventsMaxAge,
			Duplicates: min(2*time.Minute, cfg.EventsMaxAge),
		}},
		{&t.DLQ, jetstream.StreamConfig{
			Name: n.DLQStream(), Description: "jetagent dead letters: the original job and a Jetagent-Reason header",
			Subjects: []string{n.DLQSubject("*")}, Retention: jetstream.LimitsPolicy,
			Storage: jetstream.FileStorage, Replicas: cfg.Replicas, MaxAge: cfg.DLQMaxAge,
			// Within the max age, as the server demands: a DLQ max age
			// under 2 minutes stopped the worker at its start ("duplicates
			// window can not be larger then max age").
			Duplicates: dlqDuplicates(cfg.DLQMaxAge),
		}},
		{&t.Advisories, jetstream.StreamConfig{
			Name: n.AdvisoryStream(), Description: "max-deliveries advisories of the jobs stream, for dead-lettering",
			Subjects: []string{n.AdvisorySubject()}, Retention: jetstream.WorkQueuePolicy,
			Storage: jetstream.FileStorage, Replicas: cfg.Replicas, MaxAge: DefaultAdvisoryMaxAge,
		}},
	}
	// Before anything is created or changed: streams of a deployment whose
	// prefix differs from ours only in case (or in - and _) have our
	// names; such a deployment's assets are refused, never rewritten.
	for _, s := range streams {
		if err := checkStreamOwner(ctx, js, n, s.cfg); err != nil {
			return nil, err
		}
	}
	for _, s := range streams {
		if *s.dst, err = ensureStream(ctx, js, n, s.cfg, logf); err != nil {
			return nil, err
		}
	}
	t.State, err = ensureKeyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket: n.StateBucket(), Description: "jetagent job states",
		History: stateHistory, Storage: jetstream.FileStorage, Replicas: cfg.Replicas,
	}, logf)
	if err != nil {
		return nil, err
	}
	t.Transcripts, err = ensureObjectStore(ctx, js, jetstream.ObjectStoreConfig{
		Bucket: n.TranscriptBucket(), Description: "jetagent transcripts and checkpoints",
		Storage: jetstream.FileStorage, Replicas: cfg.Replicas,
	}, logf)
	if err != nil {
		return nil, err
	}
	t.Journal, err = ensureKeyValue(ctx, js, jetstream.KeyValueConfig{
		Bucket: n.JournalBucket(), Description: "jetagent call journals and checkpoints of running jobs",
		History: 1, Storage: jetstream.FileStorage, Replicas: cfg.Replicas,
		// A safety net only: a job's entries are purged when it ends.
		TTL: journalTTL,
	}, logf)
	if err != nil {
		return nil, err
	}
	if t.JournalStream, err = askExisting(ctx, func(ctx context.Context) (jetstream.Stream, error) { return js.Stream(ctx, "KV_"+n.JournalBucket()) }); err != nil {
		return nil, fmt.Errorf("stream of key-value bucket %s: %w", n.JournalBucket(), err)
	}
	for _, q := range cfg.Queues {
		c, err := ensureConsumer(ctx, t.Jobs, n, jetstream.ConsumerConfig{
			Durable: n.Consumer(q), Description: "jetagent workers of queue " + q,
			FilterSubject: n.JobsSubject(q), AckPolicy: jetstream.AckExplicitPolicy,
			DeliverPolicy: jetstream.DeliverAllPolicy,
			AckWait:       cfg.AckWait, MaxDeliver: cfg.MaxDeliver, BackOff: cfg.BackOff,
		}, logf)
		if err != nil {
			return nil, err
		}
		t.Consumers[q] = c
	}
	t.AdvisoryConsumer, err = ensureConsumer(ctx, t.Advisories, n, jetstream.ConsumerConfig{
		Durable: n.AdvisoryConsumer(), Description: "jetagent dead-letterer",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: DefaultAckWait, MaxDeliver: -1,
	}, logf)
	if err != nil {
		return nil, err
	}
	return t, nil
}

// askTimeout bounds one JetStream API request of EnsureTopology, and
// askAttempts how often an unanswered one is sent again.
const (
	askTimeout  = 2 * time.Second
	askAttempts = 5
)

// ask sends one idempotent JetStream API request (f), again when it goes
// unanswered while ctx has time left. On a cluster, a request about a
// stream that another worker is creating at that moment can get no answer
// at all (its group has no leader yet; seen with nats-server 2.15.2), so
// workers starting together would otherwise fail at random.
func ask[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, askTimeout)
		v, err := f(actx)
		cancel()
		if err == nil || attempt == askAttempts || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return v, err
		}
	}
}

// settleWait bounds how long askExisting takes "not found" for a passing
// answer about a stream that exists.
const settleWait = 30 * time.Second

// askExisting is ask about a stream (or its bucket) known to exist: this
// worker or another has just found or created it. On a cluster such a
// request right after the create can be answered "stream not found"
// (TestCluster under load, at the journal stream after its bucket was
// ensured): in nats-server 2.15.2 a new stream's preferred peer answers
// info requests even while it does not lead the group, and one that has
// the assignment but has not set the stream up locally yet answers not
// found, which can arrive before the leader's answer. So not found is
// asked again, with backoff, until settleWait passes or ctx ends.
func askExisting[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	var missing error // the last "not found", kept as the cause when ctx ends
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 20*time.Millisecond, time.Second, settleWait
	v, err := backoff.RetryWithData(func() (T, error) {
		v, err := ask(ctx, f)
		if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) && !errors.Is(err, jetstream.ErrBucketNotFound) {
			return v, backoff.Permanent(err)
		}
		missing = err
		return v, err
	}, backoff.WithContext(b, ctx))
	if err != nil && missing != nil && !errors.Is(err, missing) {
		err = fmt.Errorf("%w (the last answer before: %w)", err, missing)
	}
	return v, err
}

// otherPrefix returns the prefix other than ours that have's subjects
// belong to: a subject of have that is one of want's (which begin with
// our prefix) with another first token. Names are the prefix in upper
// case, so a deployment with prefix "Agent" finds the streams of one with
// "agent" under its own names; their subjects tell them apart.
func otherPrefix(n Names, have, want []string) (string, bool) {
	for _, w := range want {
		rest, ok := strings.CutPrefix(w, n.p()+".")
		if !ok {
			continue // not prefixed (the advisories' subject is named by the stream)
		}
		for _, h := range have {
			if p, r, ok := strings.Cut(h, "."); ok && r == rest && p != n.p() {
				return p, true
			}
		}
	}
	return "", false
}

// prefixConflict is the error for an asset of another deployment found
// under this one's name.
func prefixConflict(n Names, what, other string, subjects []string) error {
	return fmt.Errorf("%w: %s belongs to the deployment with prefix %q (subjects %s), not to this one's prefix %q: "+
		"streams, buckets and consumers are named by the prefix in upper case with - as _, so the prefixes %q and %q "+
		"share them (%s, %s, ...); nothing was changed: give each deployment a prefix of its own (JETAGENT_PREFIX)",
		ErrTopology, what, other, strings.Join(subjects, ", "), n.p(), other, n.p(), n.JobsStream(), n.StateBucket())
}

// checkStreamOwner refuses an existing stream named as want whose subjects
// belong to another prefix; a missing stream passes.
func checkStreamOwner(ctx context.Context, js jetstream.JetStream, n Names, want jetstream.StreamConfig) error {
	s, err := ask(ctx, func(ctx context.Context) (jetstream.Stream, error) { return js.Stream(ctx, want.Name) })
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("stream %s: %w", want.Name, err)
	}
	have := s.CachedInfo().Config.Subjects
	if other, ok := otherPrefix(n, have, want.Subjects); ok {
		return prefixConflict(n, "stream "+want.Name, other, have)
	}
	return nil
}

// ensureStream creates want or reconciles an existing stream with it. A
// stream whose subjects belong to another prefix is refused (otherPrefix),
// never rewritten: that deployment's submissions would find no stream.
func ensureStream(ctx context.Context, js jetstream.JetStream, n Names, want jetstream.StreamConfig, logf func(string, ...any)) (jetstream.Stream, error) {
	look := ask[jetstream.Stream]
	for range 2 { // a second pass covers losing a create race to another worker
		s, err := look(ctx, func(ctx context.Context) (jetstream.Stream, error) { return js.Stream(ctx, want.Name) })
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			if want.Name == n.JobsStream() {
				if want.FirstSeq, err = jobsFirstSeq(ctx, js, n); err != nil {
					return nil, err
				}
			}
			s, err = ask(ctx, func(ctx context.Context) (jetstream.Stream, error) { return js.CreateStream(ctx, want) })
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				look = askExisting[jetstream.Stream] // it exists: the server just said so
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("create stream %s: %w", want.Name, err)
			}
			return s, nil
		}
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", want.Name, err)
		}
		have := s.CachedInfo().Config
		if other, ok := otherPrefix(n, have.Subjects, want.Subjects); ok {
			return nil, prefixConflict(n, "stream "+want.Name, other, have.Subjects)
		}
		if have.Retention != want.Retention || have.Storage != want.Storage {
			return nil, fmt.Errorf("%w: stream %s exists with retention %s and storage %s, want %s and %s; "+
				"these cannot change in place: remove the stream (nats stream rm %s) or use another prefix",
				ErrTopology, want.Name, have.Retention, have.Storage, want.Retention, want.Storage, want.Name)
		}
		diffs := streamDiffs(have, want)
		if len(diffs) == 0 {
			return s, nil
		}
		upd := have // keep settings we do not manage (an operator's limits)
		upd.Subjects, upd.Replicas, upd.Duplicates, upd.MaxAge = want.Subjects, want.Replicas, want.Duplicates, want.MaxAge
		if want.Discard == jetstream.DiscardNew {
			upd.Discard = want.Discard
		}
		s, err = ask(ctx, func(ctx context.Context) (jetstream.Stream, error) { return js.UpdateStream(ctx, upd) })
		if err != nil {
			return nil, updateFailed("stream "+want.Name, diffs, err)
		}
		logf("updated stream %s, which had %s", want.Name, strings.Join(diffs, ", "))
		return s, nil
	}
	return nil, fmt.Errorf("%w: stream %s: created and removed concurrently", ErrTopology, want.Name)
}

func streamDiffs(have, want jetstream.StreamConfig) []string {
	var d []string
	if !slices.Equal(have.Subjects, want.Subjects) {
		d = append(d, fmt.Sprintf("subjects %v (want %v)", have.Subjects, want.Subjects))
	}
	if have.Replicas != want.Replicas {
		d = append(d, fmt.Sprintf("replicas %d (want %d)", have.Replicas, want.Replicas))
	}
	if want.Duplicates != 0 && have.Duplicates != want.Duplicates {
		d = append(d, fmt.Sprintf("duplicate window %s (want %s)", have.Duplicates, want.Duplicates))
	}
	if have.MaxAge != want.MaxAge {
		d = append(d, fmt.Sprintf("max age %s (want %s)", have.MaxAge, want.MaxAge))
	}
	if want.Discard == jetstream.DiscardNew && have.Discard != want.Discard {
		d = append(d, "discard old (want new: at a limit, new messages are refused rather than stored ones dropped)")
	}
	return d
}

// ensureKeyValue creates the bucket, or updates it when a setting we
// manage differs. It looks before it writes rather than calling
// CreateOrUpdateKeyValue: that sends an update first, and on a cluster an
// update racing another worker's create of the same bucket can go
// unanswered until the request times out (nats-server 2.15.2), while
// concurrent equal creates are answered as one.
func ensureKeyValue(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig, logf func(string, ...any)) (jetstream.KeyValue, error) {
	kv, err := ask(ctx, func(ctx context.Context) (jetstream.KeyValue, error) { return js.KeyValue(ctx, want.Bucket) })
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if kv, err = ask(ctx, func(ctx context.Context) (jetstream.KeyValue, error) { return js.CreateKeyValue(ctx, want) }); err != nil {
			return nil, fmt.Errorf("create key-value bucket %s: %w", want.Bucket, err)
		}
		return kv, nil
	}
	if err != nil {
		return nil, fmt.Errorf("key-value bucket %s: %w", want.Bucket, err)
	}
	st, err := askExisting(ctx, func(ctx context.Context) (jetstream.KeyValueStatus, error) { return kv.Status(ctx) })
	if err != nil {
		return nil, fmt.Errorf("key-value bucket %s: %w", want.Bucket, err)
	}
	have := st.Config()
	var diffs []string
	if have.History != want.History {
		diffs = append(diffs, fmt.Sprintf("history %d (want %d)", have.History, want.History))
	}
	if have.Replicas != want.Replicas {
		diffs = append(diffs, fmt.Sprintf("replicas %d (want %d)", have.Replicas, want.Replicas))
	}
	if len(diffs) == 0 {
		return kv, nil
	}
	if kv, err = ask(ctx, func(ctx context.Context) (jetstream.KeyValue, error) { return js.UpdateKeyValue(ctx, want) }); err != nil {
		return nil, updateFailed("key-value bucket "+want.Bucket, diffs, err)
	}
	logf("updated key-value bucket %s, which had %s", want.Bucket, strings.Join(diffs, ", "))
	return kv, nil
}

// ensureObjectStore is ensureKeyValue for an object store.
func ensureObjectStore(ctx context.Context, js jetstream.JetStream, want jetstream.ObjectStoreConfig, logf func(string, ...any)) (jetstream.ObjectStore, error) {
	obs, err := ask(ctx, func(ctx context.Context) (jetstream.ObjectStore, error) { return js.ObjectStore(ctx, want.Bucket) })
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if obs, err = ask(ctx, func(ctx context.Context) (jetstream.ObjectStore, error) { return js.CreateObjectStore(ctx, want) }); err != nil {
			return nil, fmt.Errorf("create object store %s: %w", want.Bucket, err)
		}
		return obs, nil
	}
	if err != nil {
		return nil, fmt.Errorf("object store %s: %w", want.Bucket, err)
	}
	st, err := askExisting(ctx, func(ctx context.Context) (jetstream.ObjectStoreStatus, error) { return obs.Status(ctx) })
	if err != nil {
		return nil, fmt.Errorf("object store %s: %w", want.Bucket, err)
	}
	if st.Replicas() == want.Replicas {
		return obs, nil
	}
	diff := fmt.Sprintf("replicas %d (want %d)", st.Replicas(), want.Replicas)
	if obs, err = ask(ctx, func(ctx context.Context) (jetstream.ObjectStore, error) { return js.UpdateObjectStore(ctx, want) }); err != nil {
		return nil, updateFailed("object store "+want.Bucket, []string{diff}, err)
	}
	logf("updated object store %s, which had %s", want.Bucket, diff)
	return obs, nil
}

// ensureConsumer creates want or updates it, logging changed settings. A
// consumer whose filter belongs to another prefix is refused, never
// rewritten: it would take that deployment's jobs.
func ensureConsumer(ctx context.Context, s jetstream.Stream, n Names, want jetstream.ConsumerConfig, logf func(string, ...any)) (jetstream.Consumer, error) {
	name := s.CachedInfo().Config.Name + "/" + want.Durable
	var diffs []string
	if c, err := ask(ctx, func(ctx context.Context) (jetstream.Consumer, error) { return s.Consumer(ctx, want.Durable) }); err == nil {
		have := c.CachedInfo().Config
		if other, ok := otherPrefix(n, []string{have.FilterSubject}, []string{want.FilterSubject}); ok {
			return nil, prefixConflict(n, "consumer "+name, other, []string{have.FilterSubject})
		}
		if have.FilterSubject != want.FilterSubject {
			diffs = append(diffs, fmt.Sprintf("filter %q (want %q)", have.FilterSubject, want.FilterSubject))
		}
		if have.AckWait != want.AckWait && len(want.BackOff) == 0 {
			diffs = append(diffs, fmt.Sprintf("ack wait %s (want %s)", have.AckWait, want.AckWait))
		}
		if have.MaxDeliver != want.MaxDeliver {
			diffs = append(diffs, fmt.Sprintf("max deliver %d (want %d)", have.MaxDeliver, want.MaxDeliver))
		}
		if !slices.Equal(have.BackOff, want.BackOff) {
			diffs = append(diffs, fmt.Sprintf("backoff %v (want %v)", have.BackOff, want.BackOff))
		}
		if len(diffs) == 0 {
			return c, nil
		}
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("consumer %s: %w", name, err)
	}
	c, err := ask(ctx, func(ctx context.Context) (jetstream.Consumer, error) { return s.CreateOrUpdateConsumer(ctx, want) })
	if err != nil {
		if len(diffs) > 0 {
			return nil, updateFailed("consumer "+name, diffs, err)
		}
		return nil, fmt.Errorf("create consumer %s: %w", name, err)
	}
	if len(diffs) > 0 {
		logf("updated consumer %s, which had %s", name, strings.Join(diffs, ", "))
	}
	return c, nil
}

// OpenTopology binds to assets a worker created, for clients that must not
// create or change them (the submit CLI).
func OpenTopology(ctx context.Context, js jetstream.JetStream, n Names) (*Topology, error) {
	t := &Topology{JS: js}
	var err error
	fail := func(what string, err error) error {
		if perm := permissionDenied(js.Conn()); perm != nil {
			return fmt.Errorf("%s: %w: %w%s", what, err, perm, permissionHint)
		}
		if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
			// No JetStream API on the server: no worker could have run there.
			return fmt.Errorf("%s: %w (is JetStream enabled on the NATS server? nats-server -js, or jetstream {} in its config)", what, err)
		}
		return fmt.Errorf("%s: %w; is a worker running? it creates the streams and buckets at start, and again within seconds when one is removed", what, err)
	}
	if t.Jobs, err = js.Stream(ctx, n.JobsStream()); err != nil {
		return nil, fail("stream "+n.JobsStream(), err)
	}
	if t.Events, err = js.Stream(ctx, n.EventsStream()); err != nil {
		return nil, fail("stream "+n.EventsStream(), err)
	}
	// Another deployment's streams under our names (a prefix that differs
	// only in case): publishing here would find no stream.
	for _, st := range []struct {
		s    jetstream.Stream
		want string
	}{{t.Jobs, n.JobsSubject("*")}, {t.Events, n.allEvents()}} {
		have := st.s.CachedInfo().Config
		if other, ok := otherPrefix(n, have.Subjects, []string{st.want}); ok {
			return nil, prefixConflict(n, "stream "+have.Name, other, have.Subjects)
		}
	}
	if t.State, err = js.KeyValue(ctx, n.StateBucket()); err != nil {
		return nil, fail("key-value bucket "+n.StateBucket(), err)
	}
	if t.Transcripts, err = js.ObjectStore(ctx, n.TranscriptBucket()); err != nil {
		return nil, fail("object store "+n.TranscriptBucket(), err)
	}
	// Older deployments have no journal bucket; clients only read it.
	if kv, err := js.KeyValue(ctx, n.JournalBucket()); err == nil {
		t.Journal = kv
	}
	return t, nil
}

// updateFailed is the error of a change of settings that did not go
// through. The server refusing it is a conflict (ErrTopology); a timeout, a
// lost connection or a server without JetStream is not, and keeps its
// cause for errors.Is either way.
func updateFailed(what string, diffs []string, err error) error {
	var apiErr *jetstream.APIError
	refused := errors.As(err, &apiErr) &&
		!errors.Is(err, jetstream.ErrJetStreamNotEnabled) && !errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount)
	if refused {
		return fmt.Errorf("%w: %s has %s; updating it failed: %w", ErrTopology, what, strings.Join(diffs, ", "), err)
	}
	return fmt.Errorf("%s has %s; updating it failed: %w", what, strings.Join(diffs, ", "), err)
}
