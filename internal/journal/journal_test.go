package journal_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"sync"
	"testing"

	"github.com/jetagent/jetagent/internal/journal"
)

// memStore is a Store in memory; fail makes every Put fail.
type memStore struct {
	mu   sync.Mutex
	m    map[string][]byte
	puts int
	fail bool
}

func (s *memStore) Put(_ context.Context, key string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errors.New("store down")
	}
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[key] = append([]byte(nil), v...)
	s.puts++
	return nil
}

func (s *memStore) snapshot() map[string][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.m)
}

func newJournal(t *testing.T, s *memStore, prior map[string][]byte) *journal.Journal {
	t.Helper()
	j, err := journal.New(s, prior)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// counter is a tool with a side effect: it counts its runs.
type counter struct {
	mu   sync.Mutex
	runs int
	keys []string
}

func (c *counter) run(ctx context.Context) (journal.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs++
	c.keys = append(c.keys, journal.KeyFromContext(ctx))
	return journal.Result{Text: "ok"}, nil
}

func TestCompletedCallsDoNotRunAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := &memStore{}
	var tool counter
	call := journal.Call{Name: "write_file", Args: json.RawMessage(`{"path":"a"}`), IdempotencyKey: "job/call1"}

	j1 := newJournal(t, s, nil)
	res, st, err := j1.Do(ctx, "c1.0", call, tool.run)
	if err != nil || st != journal.Ran || res.Text != "ok" {
		t.Fatalf("first attempt: %v %v %v", res, st, err)
	}
	// A second attempt (the worker died after the call) gets the result.
	j2 := newJournal(t, s, s.snapshot())
	if got := j2.Prior(); got != (journal.Stats{Completed: 1}) {
		t.Fatalf("prior = %+v", got)
	}
	// Key order in the arguments does not matter.
	call.Args = json.RawMessage(`{ "path": "a" }`)
	res, st, err = j2.Do(ctx, "c1.0", call, tool.run)
	if err != nil || st != journal.Replayed || res.Text != "ok" {
		t.Fatalf("second attempt: %v %v %v", res, st, err)
	}
	if tool.runs != 1 || tool.keys[0] != "job/call1" {
		t.Fatalf("runs = %d, keys %q", tool.runs, tool.keys)
	}
}

func TestInFlightCallsFollowTheAnnotationRule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		resendable bool
		want       journal.Status
		runs       int
	}{
		{"not resendable: reported, not sent", false, journal.Interrupted, 0},
		{"read-only or idempotent: sent again", true, journal.Resent, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &memStore{}
			call := journal.Call{Name: "create_issue", Args: json.RawMessage(`{}`), IdempotencyKey: "j/c", Resendable: tc.resendable}
			// The earlier attempt stored the intent and died in the call.
			j1 := newJournal(t, s, nil)
			_, _, _ = j1.Do(ctx, "c2.1", call, func(context.Context) (journal.Result, error) {
				s.fail = true // its completion is never stored
				return journal.Result{Text: "done"}, nil
			})
			s.fail = false
			var tool counter
			j2 := newJournal(t, s, s.snapshot())
			if got := j2.Prior(); got != (journal.Stats{InFlight: 1}) {
				t.Fatalf("prior = %+v", got)
			}
			res, st, err := j2.Do(ctx, "c2.1", call, tool.run)
			if err != nil || st != tc.want || tool.runs != tc.runs {
				t.Fatalf("status %v runs %d err %v; want %v %d", st, tool.runs, err, tc.want, tc.runs)
			}
			if st == journal.Interrupted && (!res.IsError || res.Text != journal.InterruptedText("create_issue")) {
				t.Fatalf("interrupted result = %+v", res)
			}
			if st == journal.Resent {
				// Its completion is stored now: a third attempt replays.
				j3 := newJournal(t, s, s.snapshot())
				if _, st, _ := j3.Do(ctx, "c2.1", call, tool.run); st != journal.Replayed || tool.runs != 1 {
					t.Fatalf("third attempt: %v, runs %d", st, tool.runs)
				}
			}
		})
	}
}

func TestNothingRunsWhenTheIntentCannotBeStored(t *testing.T) {
	t.Parallel()
	s := &memStore{fail: true}
	var tool counter
	j := newJournal(t, s, nil)
	_, _, err := j.Do(context.Background(), "c1.0", journal.Call{Name: "x", Args: json.RawMessage(`{}`)}, tool.run)
	if !errors.Is(err, journal.ErrUnavailable) || tool.runs != 0 {
		t.Fatalf("err %v, runs %d", err, tool.runs)
	}
}

func TestDivergenceIsAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := &memStore{}
	var tool counter
	j1 := newJournal(t, s, nil)
	_, _, _ = j1.Do(ctx, "c1.0", journal.Call{Name: "a", Args: json.RawMessage(`{"n":1}`)}, tool.run)
	_, _ = j1.Once(ctx, "n1", func() json.RawMessage { return json.RawMessage(`5`) })
	j2 := newJournal(t, s, s.snapshot())
	for _, tc := range []struct {
		name string
		do   func() error
	}{
		{"other arguments", func() error {
			_, _, err := j2.Do(ctx, "c1.0", journal.Call{Name: "a", Args: json.RawMessage(`{"n":2}`)}, tool.run)
			return err
		}},
		{"other tool", func() error {
			_, _, err := j2.Do(ctx, "c1.0", journal.Call{Name: "b", Args: json.RawMessage(`{"n":1}`)}, tool.run)
			return err
		}},
		{"a call where a value was", func() error {
			_, _, err := j2.Do(ctx, "n1", journal.Call{Name: "a", Args: json.RawMessage(`{}`)}, tool.run)
			return err
		}},
		{"a value where a call was", func() error {
			_, err := j2.Once(ctx, "c1.0", func() json.RawMessage { return json.RawMessage(`1`) })
			return err
		}},
	} {
		if err := tc.do(); !errors.Is(err, journal.ErrDiverged) {
			t.Errorf("%s: err = %v, want ErrDiverged", tc.name, err)
		}
	}
	if tool.runs != 1 {
		t.Fatalf("runs = %d", tool.runs)
	}
}

func TestValuesReplayAndCarryIntents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := &memStore{}
	j1 := newJournal(t, s, nil)
	v, err := j1.Once(ctx, "now.0", func() json.RawMessage { return json.RawMessage(`1700000000000`) })
	if err != nil || string(v) != "1700000000000" {
		t.Fatal(v, err)
	}
	// A round's answer and its first call's intent in one write.
	call := journal.Call{Name: "w", Args: json.RawMessage(`{}`), IdempotencyKey: "j/c"}
	if err := j1.RecordValue(ctx, "t1", json.RawMessage(`{"role":"assistant"}`), map[string]journal.Call{"c1.0": call}); err != nil {
		t.Fatal(err)
	}
	before := s.puts
	var tool counter
	if _, _, err := j1.Do(ctx, "c1.0", call, func(context.Context) (journal.Result, error) {
		if s.puts != before {
			t.Error("Do stored an intent the answer carried already")
		}
		return tool.run(ctx)
	}); err != nil {
		t.Fatal(err)
	}

	// The next attempt sees the value and the completion.
	j2 := newJournal(t, s, s.snapshot())
	if v, ok := j2.Value("t1"); !ok || string(v) != `{"role":"assistant"}` {
		t.Fatalf("t1 = %s %v", v, ok)
	}
	v, _ = j2.Once(ctx, "now.0", func() json.RawMessage { t.Error("made again"); return nil })
	if string(v) != "1700000000000" {
		t.Fatalf("now.0 = %s", v)
	}
	if _, st, _ := j2.Do(ctx, "c1.0", call, tool.run); st != journal.Replayed {
		t.Fatalf("status %v", st)
	}

	// An attempt that died after the answer's write, before the call
	// returned: the call carried by the answer is in flight.
	s2 := &memStore{}
	j3 := newJournal(t, s2, nil)
	_ = j3.RecordValue(ctx, "t1", json.RawMessage(`{}`), map[string]journal.Call{"c1.0": call})
	j4 := newJournal(t, s2, s2.snapshot())
	if got := j4.Prior(); got != (journal.Stats{Values: 1, InFlight: 1}) {
		t.Fatalf("prior = %+v", got)
	}
	if _, st, _ := j4.Do(ctx, "c1.0", call, tool.run); st != journal.Interrupted {
		t.Fatalf("status %v", st)
	}
}

func TestUnreadableEntriesAreAnError(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{`{`, `{"kind":"other"}`, `[]`} {
		if _, err := journal.New(&memStore{}, map[string][]byte{"k": []byte(raw)}); err == nil {
			t.Errorf("%s: no error", raw)
		}
	}
}
