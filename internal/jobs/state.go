package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// maxCASRetries bounds how often a transition re-reads and retries after
// losing a compare-and-swap race; contention on one job is at most a few
// parties (a worker, a canceller, a dead-letterer), so this is never reached
// in practice.
const maxCASRetries = 32

// stateStore is the KV bucket of job states. Every write is a
// compare-and-swap on the key's revision, so concurrent parties (the
// worker running the job, a canceller, the dead-letterer, a second worker
// after a redelivery) never overwrite each other's transitions.
//
// A worker holds the state and revision it last read or wrote of each job
// it runs (hold), so a transition of such a job writes at once against the
// revision it holds instead of reading first: a party that wrote in
// between makes the compare-and-swap fail, and the transition reads and
// decides again. A decision not to write made on the held state (f's error,
// or nothing to write) is checked on a fresh read before it is returned,
// so what a transition decides is always what it would decide on the
// current state.
type stateStore struct {
	kv  jetstream.KeyValue
	now func() time.Time

	mu   sync.Mutex
	held map[string]*heldState // jobs held; nil entry: held, nothing known yet
}

// heldState is a job's state at a revision, as last read or written.
type heldState struct {
	st  State
	rev uint64
}

func newStateStore(kv jetstream.KeyValue) *stateStore {
	return &stateStore{kv: kv, now: time.Now, held: map[string]*heldState{}}
}

// hold makes the store keep what it reads and writes of id, until release.
func (s *stateStore) hold(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.held[id]; !ok {
		s.held[id] = nil
	}
}

// release forgets id's held state.
func (s *stateStore) release(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, id)
}

// remember keeps st at rev as id's held state when id is held.
func (s *stateStore) remember(id string, st *State, rev uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.held[id]; ok {
		if st == nil {
			s.held[id] = nil
			return
		}
		s.held[id] = &heldState{st: *st, rev: rev}
	}
}

// holding returns id's held state and revision.
func (s *stateStore) holding(id string) (*State, uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[id]
	if h == nil {
		return nil, 0, false
	}
	st := h.st
	return &st, h.rev, true
}

// get returns the state of id and its revision, or ErrNotFound.
func (s *stateStore) get(ctx context.Context, id string) (*State, uint64, error) {
	e, err := s.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("state of %s: %w", id, err)
	}
	var st State
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return nil, 0, &badStateError{id: id, rev: e.Revision(), raw: e.Value(), err: err}
	}
	if !st.Status.known() {
		return nil, 0, &badStateError{id: id, rev: e.Revision(), raw: e.Value(), err: fmt.Errorf("status %q is none of a job's", st.Status)}
	}
	s.remember(id, &st, e.Revision())
	return &st, e.Revision(), nil
}

// badStateError is a job's state that is not one (not JSON, a field of
// the wrong type, no known status): put by hand (nats kv put) or by
// another program. Taken for a store that did not answer, it kept the
// job's last delivery for ever, trying again every second.
type badStateError struct {
	id  string
	rev uint64 // the entry's, to replace it and nothing written since
	raw []byte
	err error
}

func (e *badStateError) Error() string {
	raw := e.raw
	if len(raw) > 120 {
		raw = append(raw[:120:120], "..."...)
	}
	return fmt.Sprintf("the state of %s is not a job state (%v): %q", e.id, e.err, raw)
}

func (e *badStateError) Unwrap() error { return e.err }

// replaceBad writes st over id's bad state at rev (a compare-and-swap:
// nothing written since is replaced).
func (s *stateStore) replaceBad(ctx context.Context, bad *badStateError, st *State) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	rev, err := s.kv.Update(ctx, bad.id, b, bad.rev)
	if err != nil {
		return fmt.Errorf("replace the state of %s: %w", bad.id, err)
	}
	s.remember(bad.id, st, rev)
	return nil
}

// update applies f to the current state of id (nil when there is none)
// and writes what f returns with compare-and-swap, re-reading and calling
// f again when another party wrote first. f returning an error aborts with
// that error; f returning nil, nil leaves the state as it is.
//
// For a held job (see hold) the first try works on the held state without
// reading; see stateStore.
func (s *stateStore) update(ctx context.Context, id string, f func(cur *State) (*State, error)) (*State, error) {
	cur, rev, held := s.holding(id)
	for range maxCASRetries {
		if !held {
			var err error
			cur, rev, err = s.get(ctx, id)
			if err != nil && !errors.Is(err, ErrNotFound) {
				return nil, err
			}
		}
		var in *State
		if cur != nil {
			c := *cur
			in = &c
		}
		next, err := f(in)
		if err != nil || next == nil {
			if held { // decided on the held state: confirm on the current one
				held = false
				continue
			}
			return cur, err
		}
		held = false
		next.ID = id
		next.UpdatedAt = s.now().UTC()
		b, err := json.Marshal(next)
		if err != nil {
			return nil, err
		}
		var nrev uint64
		if cur == nil {
			nrev, err = s.kv.Create(ctx, id, b)
		} else {
			nrev, err = s.kv.Update(ctx, id, b, rev)
		}
		switch {
		case err == nil:
			s.remember(id, next, nrev)
			return next, nil
		case errors.Is(err, jetstream.ErrKeyExists), errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			continue // lost the race: look again
		default:
			return nil, fmt.Errorf("state of %s: %w", id, storeFull(err))
		}
	}
	return nil, fmt.Errorf("%w: %s: too many concurrent updates", ErrConflict, id)
}

// stateOpBound bounds a transition on a job's settling path (its final
// state, a hand-back, a dead job), retries included; stateTryTimeout
// bounds one try within it. As with the journal's requests
// (journalTryTimeout): a request a NATS server took just before it was
// killed is never answered, and one try would otherwise spend the whole
// bound although the server is back at once.
const (
	stateOpBound    = 10 * time.Second
	stateTryTimeout = 3 * time.Second
)

// errStateUnavailable: a transition could not be stored within
// stateOpBound (NATS away, requests or answers lost). Nothing was decided:
// the state may be as it was, or, when a try's answer was lost, as written.
var errStateUnavailable = errors.New("state store unavailable")

// decided carries an error of a transition's f through update: a decision
// on the state, not a failure to reach the store, so never tried again.
type decided struct{ err error }

func (d decided) Error() string { return d.err.Error() }
func (d decided) Unwrap() error { return d.err }

// updateRetried is update with each try bounded by stateTryTimeout and
// tried again, with backoff, within stateOpBound (and ctx), while the
// store cannot be reached. f's errors end it at once, as f returned them;
// a failure to reach the store is errStateUnavailable, wrapping the last
// try's error. A try whose write landed but whose answer was lost is
// followed by one that finds the state as written (its compare-and-swap
// fails on the revision, and f is called on a fresh read): f must
// recognise its own write there and return nil, nil.
func (s *stateStore) updateRetried(ctx context.Context, id string, f func(cur *State) (*State, error)) (*State, error) {
	return s.updateRetriedFull(ctx, id, f, false)
}

// updateRetriedFull is updateRetried; with fullIsFinal a full store ends
// it at once: a submitter is told so then, rather than after the whole
// bound as "state store unavailable" (the store answered; a worker's
// transitions, which free room as jobs end, keep trying).
func (s *stateStore) updateRetriedFull(ctx context.Context, id string, f func(cur *State) (*State, error), fullIsFinal bool) (*State, error) {
	ctx, cancel := context.WithTimeout(ctx, stateOpBound)
	defer cancel()
	var out *State
	var last error
	op := func() error {
		tctx, cancel := context.WithTimeout(ctx, stateTryTimeout)
		defer cancel()
		var err error
		out, err = s.update(tctx, id, func(cur *State) (*State, error) {
			next, err := f(cur)
			if err != nil {
				return nil, decided{err}
			}
			return next, nil
		})
		var d decided
		switch {
		case err == nil:
			return nil
		case errors.As(err, &d):
			return backoff.Permanent(err)
		}
		last = err
		var bad *badStateError
		var apiErr *jetstream.APIError
		if fullIsFinal && errors.As(err, &apiErr) && apiErr.ErrorCode == jsInsufficientResources {
			return backoff.Permanent(decided{err})
		}
		if errors.Is(err, nats.ErrConnectionClosed) || errors.As(err, &bad) {
			// Closed for good, or a state that is none: no try would do.
			return backoff.Permanent(err)
		}
		return err
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 100*time.Millisecond, time.Second
	err := backoff.Retry(op, backoff.WithContext(b, ctx))
	var d decided
	var bad *badStateError
	switch {
	case err == nil:
		return out, nil
	case errors.As(err, &d):
		return out, d.err
	case errors.As(err, &bad):
		return nil, err // the store answered: not unavailable
	case last == nil: // ctx ended before a try
		last = err
	}
	return nil, fmt.Errorf("%w: %w", errStateUnavailable, last)
}

// wait returns the state of id once until(state) holds, watching the key.
func (s *stateStore) wait(ctx context.Context, id string, until func(*State) bool) (*State, error) {
	w, err := s.kv.Watch(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("watch state of %s: %w", id, err)
	}
	defer w.Stop() //nolint:errcheck // stopping a watch: nothing to do on failure
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("watch state of %s: watcher closed", id)
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue // nil marks the end of the initial values
			}
			var st State
			if json.Unmarshal(e.Value(), &st) != nil || !st.Status.known() {
				// Not a job state (put by hand): the worker that gets the
				// job replaces it (refuseBadState); the next is awaited.
				continue
			}
			if until(&st) {
				return &st, nil
			}
		}
	}
}

// summary cuts a task for the state's listing field.
func summary(task string) string {
	const n = 200
	r := []rune(task)
	if len(r) <= n {
		return task
	}
	return string(r[:n-1]) + "…"
}

// OtherTask reports whether the state was recorded for a task other than
// task (as far as its summary shows): a submission that reuses the id of
// another job. A state without a task (a job refused at the door) says
// nothing either way.
func (s *State) OtherTask(task string) bool {
	return s != nil && s.Task != "" && s.Task != summary(task)
}
