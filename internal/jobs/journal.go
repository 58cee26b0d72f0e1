package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/journal"
)

// journalOpBound bounds one journal or checkpoint write, retries
// included: a write that cannot be stored in this time fails the call
// (nothing is sent) and the attempt is handed back, rather than holding
// its slot and heartbeats until the job's timeout.
const journalOpBound = 10 * time.Second

// journalTryTimeout bounds one try within journalOpBound: a request the
// server never answers (taken by a server killed before it stored it)
// would otherwise spend the whole bound, though the server is back at
// once and the next try would be answered.
const journalTryTimeout = 3 * time.Second

// journalKey is the KV key of a journal entry of job id.
func journalKey(id, entry string) string { return id + ".j." + entry }

// checkpointKey is the KV key of a job's checkpoint (or of a reference to
// it when it is too large for a KV value).
func checkpointKey(id string) string { return id + ".cp" }

// checkpointRef points at a checkpoint stored as an object.
type checkpointRef struct {
	Object string `json:"object"`
}

// journalStore is a job's journal in the journal bucket.
type journalStore struct{ e *runEnv }

func (s journalStore) Put(ctx context.Context, key string, value []byte) error {
	if strings.ContainsAny(key, " *>") || key == "" {
		return fmt.Errorf("journal key %q is not a subject-safe token", key)
	}
	e := s.e
	if len(value) > e.w.payloadBudget() {
		// A long tool output: the entry goes to the object store, its key
		// holds a reference (as for a large checkpoint).
		if err := e.refuse(); err != nil {
			return err
		}
		name := JournalObjectName(e.jobID, key)
		octx, cancel := context.WithTimeout(ctx, journalOpBound)
		err := e.w.putObject(octx, name, value)
		cancel()
		if err != nil {
			return fmt.Errorf("store %s: %w", name, err)
		}
		e.noteJournalObject(name)
		ref, _ := json.Marshal(checkpointRef{Object: name})
		value = append([]byte{checkpointMark}, ref...)
	}
	return e.boundedPut(ctx, journalKey(e.jobID, key), value)
}

// noteJournalObject remembers an object of the job's journal, deleted
// with the journal when the job ends.
func (e *runEnv) noteJournalObject(name string) {
	e.objMu.Lock()
	e.journalObjects = append(e.journalObjects, name)
	e.objMu.Unlock()
}

func (e *runEnv) Journal() journal.Store { return journalStore{e} }

// boundedPut puts value at key in the journal bucket, retrying within
// journalOpBound; refused once the attempt is fenced.
func (e *runEnv) boundedPut(ctx context.Context, key string, value []byte) error {
	if err := e.refuse(); err != nil {
		return err
	}
	kv := e.w.topo.Journal
	ctx, cancel := context.WithTimeout(ctx, journalOpBound)
	defer cancel()
	op := func() error {
		if err := e.refuse(); err != nil {
			return backoff.Permanent(err)
		}
		tctx, cancel := context.WithTimeout(ctx, journalTryTimeout)
		_, err := kv.Put(tctx, key, value)
		cancel()
		if errors.Is(err, nats.ErrMaxPayload) {
			return backoff.Permanent(err) // another try would not fit either
		}
		return err
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 100*time.Millisecond, 2*time.Second
	if err := backoff.Retry(op, backoff.WithContext(b, ctx)); err != nil {
		return fmt.Errorf("store %s: %w", key, err)
	}
	e.journaled.Store(true)
	return nil
}

func (e *runEnv) LoadJournal(ctx context.Context) (map[string][]byte, error) {
	// A message's first attempt has nothing to find (ids are never
	// reused): no round trip for it.
	if e.attempt <= 1 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, journalOpBound)
	defer cancel()
	var out map[string][]byte
	op := func() error {
		tctx, cancel := context.WithTimeout(ctx, journalTryTimeout)
		defer cancel()
		var err error
		out, err = e.loadJournal(tctx)
		return err
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 100*time.Millisecond, time.Second
	if err := backoff.Retry(op, backoff.WithContext(b, ctx)); err != nil {
		return nil, fmt.Errorf("load journal of %s: %w", e.jobID, err)
	}
	e.journalLoaded.Store(true)
	return out, nil
}

// loadJournal is one try of LoadJournal: a watch of the job's keys until
// their initial values are in (a watch whose consumer the server lost
// would wait for ever, so ctx bounds the try).
func (e *runEnv) loadJournal(ctx context.Context) (map[string][]byte, error) {
	prefix := journalKey(e.jobID, "")
	w, err := e.w.topo.Journal.WatchFiltered(ctx, []string{prefix + ">"}, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer w.Stop() //nolint:errcheck // the watcher's subscription only
	out := map[string][]byte{}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case ent, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("watcher stopped")
			}
			if ent == nil { // the initial values are all in
				return out, nil
			}
			v := ent.Value()
			if ref, ok := isCheckpointRef(v); ok {
				e.noteJournalObject(ref.Object)
				if v, err = e.w.topo.Transcripts.GetBytes(ctx, ref.Object); err != nil {
					return nil, fmt.Errorf("%s: %w", ref.Object, err)
				}
			}
			out[strings.TrimPrefix(ent.Key(), prefix)] = v
		}
	}
}

// LoadCheckpoint returns the job's last saved checkpoint, or nil.
func (e *runEnv) LoadCheckpoint(ctx context.Context) ([]byte, error) {
	if e.attempt <= 1 {
		return nil, nil
	}
	ent, err := e.w.topo.Journal.Get(ctx, checkpointKey(e.jobID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return e.legacyCheckpoint(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("load checkpoint of %s: %w", e.jobID, err)
	}
	if ref, ok := isCheckpointRef(ent.Value()); ok {
		e.checkpointObject.Store(true)
		b, err := e.w.topo.Transcripts.GetBytes(ctx, ref.Object)
		if err != nil {
			return nil, fmt.Errorf("load checkpoint of %s from %s: %w", e.jobID, ref.Object, err)
		}
		return b, nil
	}
	return ent.Value(), nil
}

// legacyCheckpoint reads a checkpoint an older worker stored as an object.
func (e *runEnv) legacyCheckpoint(ctx context.Context) ([]byte, error) {
	b, err := e.w.topo.Transcripts.GetBytes(ctx, CheckpointName(e.jobID))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load checkpoint of %s: %w", e.jobID, err)
	}
	e.checkpointObject.Store(true)
	return b, nil
}

// checkpointMark starts a KV value that references an object: a byte no
// JSON checkpoint starts with.
const checkpointMark = 0x01

func isCheckpointRef(v []byte) (checkpointRef, bool) {
	var ref checkpointRef
	if len(v) < 2 || v[0] != checkpointMark {
		return ref, false
	}
	if json.Unmarshal(v[1:], &ref) != nil || ref.Object == "" {
		return ref, false
	}
	return ref, true
}

// SaveCheckpoint stores data as the job's checkpoint: in the journal
// bucket (one write) when it fits a message, else as an object that a
// journal value references.
func (e *runEnv) SaveCheckpoint(ctx context.Context, data []byte) error {
	if err := e.refuse(); err != nil {
		return err
	}
	if len(data) > 0 && data[0] == checkpointMark {
		return fmt.Errorf("save checkpoint of %s: data starts with the reference mark", e.jobID)
	}
	value := data
	if len(data) > e.w.payloadBudget() {
		octx, cancel := context.WithTimeout(ctx, journalOpBound)
		err := e.w.putObject(octx, CheckpointName(e.jobID), data)
		cancel()
		if err != nil {
			return fmt.Errorf("save checkpoint of %s: %w", e.jobID, err)
		}
		e.checkpointObject.Store(true)
		ref, _ := json.Marshal(checkpointRef{Object: CheckpointName(e.jobID)})
		value = append([]byte{checkpointMark}, ref...)
	}
	if err := e.boundedPut(ctx, checkpointKey(e.jobID), value); err != nil {
		return fmt.Errorf("save checkpoint of %s: %w", e.jobID, err)
	}
	return nil
}

// forgetProgress drops a finished job's checkpoint and journal: called
// only once its final state is stored (a failed write of it must leave
// the next attempt its progress). What a crash leaves here is harmless: a
// finished job never runs again, and the bucket's TTL removes it.
func (w *Worker) forgetProgress(ctx context.Context, d delivery, checkpointObject bool) {
	d.env.objMu.Lock()
	objects := d.env.journalObjects
	d.env.objMu.Unlock()
	if d.attempt <= 1 && !d.env.journaled.Load() && !checkpointObject && len(objects) == 0 {
		return // a first attempt that stored nothing: nothing to purge
	}
	if d.attempt > 1 && !d.env.journalLoaded.Load() {
		// Earlier attempts' objects are unknown here (a job cancelled
		// before this attempt ran it, a runner that did not load the
		// journal): read them from the entries.
		w.forgetProgressOf(ctx, d.env, d.log)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), journalOpBound)
	defer cancel()
	w.dropProgress(ctx, d.id, objects, checkpointObject, d.log)
}

// forgetProgressOf is forgetProgress for a job whose journal this worker
// has not read (a job dead-lettered from the server's advisory, or an
// attempt that did not load it): the objects its entries reference (long
// entries, a large checkpoint) are read from the entries, then everything
// goes. Only for a job whose state is final.
func (w *Worker) forgetProgressOf(ctx context.Context, env *runEnv, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), journalOpBound)
	defer cancel()
	var objects []string
	op := func() error {
		tctx, cancel := context.WithTimeout(ctx, journalTryTimeout)
		defer cancel()
		var err error
		objects, err = w.journalObjects(tctx, env.jobID)
		return err
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 100*time.Millisecond, time.Second
	if err := backoff.Retry(op, backoff.WithContext(b, ctx)); err != nil {
		// Purged all the same: left, the keys would keep a finished job's
		// entries for the bucket's TTL, the objects stay either way.
		log.Warn("journal read failed; objects it references may be left", "err", err)
	}
	env.objMu.Lock()
	objects = append(objects, env.journalObjects...)
	env.objMu.Unlock()
	slices.Sort(objects)
	w.dropProgress(ctx, env.jobID, slices.Compact(objects), env.checkpointObject.Load(), log)
}

// journalObjects returns the objects the journal entries of job id
// reference.
func (w *Worker) journalObjects(ctx context.Context, id string) ([]string, error) {
	kw, err := w.topo.Journal.WatchFiltered(ctx, []string{id + ".>"}, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer kw.Stop() //nolint:errcheck // the watcher's subscription only
	var out []string
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case ent, ok := <-kw.Updates():
			if !ok {
				return nil, errors.New("watcher stopped")
			}
			if ent == nil { // the initial values are all in
				return out, nil
			}
			if ref, ok := isCheckpointRef(ent.Value()); ok {
				out = append(out, ref.Object)
			}
		}
	}
}

// dropProgress deletes objects (a job's long journal entries; with
// checkpointObject its checkpoint object), then purges the job's journal
// keys: in that order, so a crash between the two leaves keys the TTL
// removes rather than objects nothing references.
func (w *Worker) dropProgress(ctx context.Context, id string, objects []string, checkpointObject bool, log *slog.Logger) {
	for _, name := range objects {
		if err := w.deleteObject(ctx, name); err != nil {
			log.Warn("journal object delete failed", "object", name, "err", err)
		}
	}
	if checkpointObject && !slices.Contains(objects, CheckpointName(id)) {
		if err := w.deleteObject(ctx, CheckpointName(id)); err != nil {
			log.Warn("checkpoint delete failed", "err", err)
		}
	}
	if err := w.purgeJournal(ctx, id); err != nil {
		log.Warn("journal purge failed", "err", err)
	}
}

// deleteObject deletes object name (gone already is no error), tried
// again within ctx, each try bounded by journalTryTimeout as the purge
// is: one request never answered (a stream leader elected, or a server
// killed, while it was in flight) spent the whole bound shared with the
// other deletes and the purge, so those failed too and the objects and
// journal were left.
func (w *Worker) deleteObject(ctx context.Context, name string) error {
	op := func() error {
		tctx, cancel := context.WithTimeout(ctx, journalTryTimeout)
		defer cancel()
		err := w.topo.Transcripts.Delete(tctx, name)
		switch {
		case errors.Is(err, jetstream.ErrObjectNotFound):
			return nil
		case errors.Is(err, jetstream.ErrStreamNotFound), errors.Is(err, jetstream.ErrBucketNotFound):
			return backoff.Permanent(err) // the bucket is gone, and its objects with it
		case errors.Is(err, jetstream.ErrBadObjectMeta):
			return backoff.Permanent(err) // another try reads the same
		}
		return err
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 100*time.Millisecond, time.Second
	if err := backoff.Retry(op, backoff.WithContext(b, ctx)); err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return nil
}

// purgeJournal removes every key of job id from the journal bucket in one
// request (the bucket's stream purged by subject), tried again within
// ctx, each try bounded by journalTryTimeout as the journal's writes are:
// a request that was never answered (a stream leader elected, or a server
// killed, while it was in flight) spent the whole bound, holding the
// job's terminal event and ack, and left the journal for the bucket's TTL.
func (w *Worker) purgeJournal(ctx context.Context, id string) error {
	op := func() error {
		tctx, cancel := context.WithTimeout(ctx, journalTryTimeout)
		defer cancel()
		err := w.topo.JournalStream.Purge(tctx, jetstream.WithPurgeSubject("$KV."+w.names.JournalBucket()+"."+id+".>"))
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return backoff.Permanent(err) // the bucket is gone, and its keys with it
		}
		return err
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 100*time.Millisecond, time.Second
	if err := backoff.Retry(op, backoff.WithContext(b, ctx)); err != nil {
		return fmt.Errorf("purge the journal of %s: %w", id, err)
	}
	return nil
}
