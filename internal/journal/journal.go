package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
)

var (
	// ErrUnavailable: an entry could not be stored; the call was not sent.
	ErrUnavailable = errors.New("journal: entry could not be stored")
	// ErrDiverged: an earlier attempt made another call, or recorded
	// another kind of entry, at the same place.
	ErrDiverged = errors.New("journal: diverged from the earlier attempt")
)

// MetaKey is the _meta key of a tools/call request that carries the
// idempotency key, so servers that can deduplicate do.
const MetaKey = "io.jetagent/idempotency-key"

// Store puts entries durably: Put returns nil only once the entry is
// stored (an attempt that no longer owns its job must get an error).
type Store interface {
	Put(ctx context.Context, key string, value []byte) error
}

// Result is what a call returned, as the journal keeps it.
type Result struct {
	Text       string          `json:"text"`
	Structured json.RawMessage `json:"structured,omitempty"`
	IsError    bool            `json:"is_error,omitempty"`
}

// Call is one call to journal.
type Call struct {
	// Name is the tool that runs (the real one behind call_tool).
	Name string `json:"name"`
	// Args is its arguments, compact JSON.
	Args json.RawMessage `json:"args"`
	// IdempotencyKey is the same in every attempt (job id and call id).
	IdempotencyKey string `json:"idempotency_key"`
	// Resendable says the tool may run twice without harm (readOnlyHint
	// or idempotentHint): an interrupted call of it is sent again.
	Resendable bool `json:"-"`
}

// Status says how Do answered.
type Status int

const (
	// Ran: no earlier attempt reached the call; it ran.
	Ran Status = iota
	// Replayed: an earlier attempt completed the call; its result is
	// returned and nothing ran.
	Replayed
	// Resent: an earlier attempt sent the call and stopped before it
	// returned; the tool is resendable, so it ran again.
	Resent
	// Interrupted: as Resent, but the tool is not resendable: nothing ran
	// and the result is an error saying the effect is unknown.
	Interrupted
)

func (s Status) String() string {
	switch s {
	case Ran:
		return "ran"
	case Replayed:
		return "replayed"
	case Resent:
		return "resent"
	case Interrupted:
		return "interrupted"
	}
	return fmt.Sprintf("Status(%d)", int(s))
}

// entry kinds
const (
	kindIntent = "intent"
	kindDone   = "done"
	kindValue  = "value"
)

// entry is one stored record. A call's intent and completion share a key:
// the completion replaces the intent.
type entry struct {
	Kind string `json:"kind"`
	Call
	Result *Result         `json:"result,omitempty"`
	Value  json.RawMessage `json:"value,omitempty"`
	// Intents are calls started together with a value (a round's answer
	// and its first calls go in one write).
	Intents map[string]Call `json:"intents,omitempty"`
}

// Journal is one attempt's view of a job's journal. It is safe for
// concurrent use (a round's calls run in parallel).
type Journal struct {
	store Store

	mu    sync.Mutex
	prior map[string]entry // what earlier attempts left
	mine  map[string]bool  // intents this attempt stored already
}

// New returns the journal of an attempt. prior is what earlier attempts
// stored (key → value as given to Store.Put; nil for a first attempt). An
// entry that cannot be read is an error: guessing could repeat a call.
func New(store Store, prior map[string][]byte) (*Journal, error) {
	j := &Journal{store: store, prior: map[string]entry{}, mine: map[string]bool{}}
	// Intents carried by a value are expanded first, so a later intent or
	// completion of the same call (its own key) wins whatever the order.
	keys := make([]string, 0, len(prior))
	for k := range prior {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	own := map[string]entry{}
	for _, k := range keys {
		var e entry
		if err := json.Unmarshal(prior[k], &e); err != nil {
			return nil, fmt.Errorf("journal: entry %s: %w", k, err)
		}
		switch e.Kind {
		case kindIntent, kindDone, kindValue:
		default:
			return nil, fmt.Errorf("journal: entry %s: unknown kind %q", k, e.Kind)
		}
		own[k] = e
		for ik, c := range e.Intents {
			if _, ok := j.prior[ik]; !ok {
				j.prior[ik] = entry{Kind: kindIntent, Call: c}
			}
		}
	}
	for k, e := range own {
		j.prior[k] = e
	}
	return j, nil
}

// Stats counts what earlier attempts left.
type Stats struct {
	Values    int `json:"values"`
	Completed int `json:"completed"`
	InFlight  int `json:"in_flight"`
}

// Prior reports what earlier attempts left; zero for a first attempt.
func (j *Journal) Prior() Stats {
	j.mu.Lock()
	defer j.mu.Unlock()
	var s Stats
	for _, e := range j.prior {
		switch e.Kind {
		case kindValue:
			s.Values++
		case kindDone:
			s.Completed++
		case kindIntent:
			s.InFlight++
		}
	}
	return s
}

// Value returns the value an earlier attempt recorded at key, if any.
func (j *Journal) Value(key string) (json.RawMessage, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.prior[key]
	if !ok || e.Kind != kindValue {
		return nil, false
	}
	return e.Value, true
}

// Completed reports whether an earlier attempt completed the call at key
// (Do will return its result without running it).
func (j *Journal) Completed(key string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.prior[key]
	return ok && e.Kind == kindDone && e.Result != nil && !j.mine[key]
}

// Made reports whether an earlier attempt made the call at key: its
// intent or its completion is stored. A replay tells by it a call the
// earlier run never reached (code mode: an execution cut short).
func (j *Journal) Made(key string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.prior[key]
	return ok && e.Kind != kindValue
}

// RecordValue stores v at key, with the intents of calls about to be
// sent (keyed like Do's keys), in one write. Do on those keys then
// stores no intent of its own.
func (j *Journal) RecordValue(ctx context.Context, key string, v json.RawMessage, intents map[string]Call) error {
	e := entry{Kind: kindValue, Value: v, Intents: intents}
	if err := j.put(ctx, key, e); err != nil {
		return err
	}
	j.mu.Lock()
	j.prior[key] = e
	for k := range intents {
		j.mine[k] = true
	}
	j.mu.Unlock()
	return nil
}

// Once returns the value recorded at key, or stores and returns make()'s
// (Date.now and Math.random in code mode).
func (j *Journal) Once(ctx context.Context, key string, make func() json.RawMessage) (json.RawMessage, error) {
	j.mu.Lock()
	e, ok := j.prior[key]
	j.mu.Unlock()
	if ok {
		if e.Kind != kindValue {
			return nil, fmt.Errorf("%w: %s was a call, now a value", ErrDiverged, key)
		}
		return e.Value, nil
	}
	v := make()
	if err := j.RecordValue(ctx, key, v, nil); err != nil {
		return nil, err
	}
	return v, nil
}

// Do runs c at key through the journal: a completed call's result is
// returned without running; an interrupted one is resent or reported
// (see Status); otherwise its intent is stored, run runs it and its
// result is stored. run's error is returned as is after the completion
// (a transport failure is a result too: the call may have taken effect).
// Do returns ErrUnavailable, and runs nothing, when the intent cannot be
// stored, and ErrDiverged when an earlier attempt made another call here.
func (j *Journal) Do(ctx context.Context, key string, c Call, run func(context.Context) (Result, error)) (Result, Status, error) {
	j.mu.Lock()
	prev, seen := j.prior[key]
	mine := j.mine[key]
	j.mu.Unlock()

	status := Ran
	if seen && !mine {
		if prev.Kind == kindValue {
			return Result{}, Ran, fmt.Errorf("%w: %s was a value, now a call of %s", ErrDiverged, key, c.Name)
		}
		if prev.Name != c.Name || !sameJSON(prev.Args, c.Args) {
			return Result{}, Ran, fmt.Errorf("%w: at %s the earlier attempt called %s(%s), this one %s(%s)",
				ErrDiverged, key, prev.Name, prev.Args, c.Name, c.Args)
		}
		switch {
		case prev.Kind == kindDone && prev.Result != nil:
			return *prev.Result, Replayed, nil
		case !c.Resendable:
			return Result{Text: InterruptedText(c.Name), IsError: true}, Interrupted, nil
		}
		status = Resent
	}
	if !mine {
		if err := j.put(ctx, key, entry{Kind: kindIntent, Call: c}); err != nil {
			return Result{}, status, err
		}
		j.mu.Lock()
		j.mine[key] = true
		j.mu.Unlock()
	}
	res, runErr := run(ContextWithKey(ctx, c.IdempotencyKey))
	if runErr != nil {
		res = Result{Text: "Error: " + runErr.Error(), IsError: true}
	}
	done := entry{Kind: kindDone, Call: c, Result: &res}
	// The call ran: a completion that cannot be stored leaves the intent,
	// and a later attempt treats the call as interrupted (never as not
	// run), so the error is not the caller's concern beyond the run's own.
	if err := j.put(context.WithoutCancel(ctx), key, done); err == nil {
		j.mu.Lock()
		j.prior[key] = done
		j.mu.Unlock()
	}
	return res, status, runErr
}

// InterruptedText is the tool error a model gets for an interrupted call
// that may not be sent again.
func InterruptedText(name string) string {
	return fmt.Sprintf("Error: the call of %s was interrupted: the worker running this job stopped after sending it and before it returned, so whether it took effect is unknown. It was not sent again because %s is not marked read-only or idempotent. Check its effect (for example with a read-only tool) before calling it again.", name, name)
}

func (j *Journal) put(ctx context.Context, key string, e entry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, key, err)
	}
	if err := j.store.Put(ctx, key, b); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, key, err)
	}
	return nil
}

func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x) // maps marshal with sorted keys
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

type ctxKey struct{}

// ContextWithKey returns ctx carrying a call's idempotency key, which the
// MCP session puts in _meta and the client-tool caller in its request.
func ContextWithKey(ctx context.Context, key string) context.Context {
	if key == "" {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, key)
}

// KeyFromContext returns the idempotency key ctx carries, or "".
func KeyFromContext(ctx context.Context) string {
	k, _ := ctx.Value(ctxKey{}).(string)
	return k
}
