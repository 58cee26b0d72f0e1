package jobs

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/natstest"
)

// The journal and the checkpoint carry over to the next attempt — a
// checkpoint too large for a message through an object — and go once the
// job has its final state.
func TestJournalAndCheckpointCarryOverAndGo(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, startServer(t))
	big := bytes.Repeat([]byte("x"), 2<<20) // over any max_payload
	// c1.1 is a long tool output: over max_payload, it goes to an object.
	entries := map[string][]byte{"t1": []byte(`{"kind":"value"}`), "c1.0": []byte(`{"kind":"done"}`), "c1.1": append([]byte(`{"kind":"done","x":"`), append(bytes.Repeat([]byte("y"), 3<<20), '"', '}')...)}
	type seen struct {
		journal    map[string][]byte
		checkpoint []byte
		err        error
	}
	second := make(chan seen, 1)
	runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
		if env.Attempt() == 1 {
			if prior, err := env.LoadJournal(ctx); err != nil || prior != nil {
				t.Errorf("first attempt's journal: %v, %v", prior, err)
			}
			for k, v := range entries {
				if err := env.Journal().Put(ctx, k, v); err != nil {
					return nil, err
				}
			}
			if err := env.SaveCheckpoint(ctx, big); err != nil {
				return nil, err
			}
			return nil, Retryable(errors.New("provider overloaded"))
		}
		var s seen
		s.journal, s.err = env.LoadJournal(ctx)
		if s.err == nil {
			s.checkpoint, s.err = env.LoadCheckpoint(ctx)
		}
		second <- s
		return &Outcome{Result: agentloop.Result{Answer: "ok"}}, nil
	})
	startWorker(t, nc, Config{Runner: runner, RetryDelay: 10 * time.Millisecond})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	if _, err := c.Submit(ctx, &Job{ID: "carry", Task: "x"}); err != nil {
		t.Fatal(err)
	}
	var s seen
	select {
	case s = <-second:
	case <-ctx.Done():
		t.Fatal("no second attempt")
	}
	if s.err != nil || !maps.EqualFunc(s.journal, entries, bytes.Equal) || !bytes.Equal(s.checkpoint, big) {
		t.Fatalf("second attempt: journal %v, checkpoint %d bytes, %v", s.journal, len(s.checkpoint), s.err)
	}
	if st := waitStatus(t, c, "carry", StatusSucceeded); st.Attempt != 2 {
		t.Fatalf("state %+v", st)
	}
	// Gone: every journal key and the checkpoint object. The purge follows
	// the final state, so wait for the terminal event first.
	watchEvents(t, c, "carry")
	w, err := c.topo.Journal.WatchFiltered(ctx, []string{"carry.>"}, jetstream.IgnoreDeletes())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop() //nolint:errcheck
	for e := range w.Updates() {
		if e == nil {
			break
		}
		t.Errorf("journal key left: %s", e.Key())
	}
	for _, name := range []string{CheckpointName("carry"), JournalObjectName("carry", "c1.1")} {
		if _, err := c.topo.Transcripts.GetInfo(ctx, name); !errors.Is(err, jetstream.ErrObjectNotFound) {
			t.Errorf("object %s after the job: %v", name, err)
		}
	}
}

// A fenced attempt can neither journal a call nor save a checkpoint.
func TestFencedAttemptCannotJournal(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, startServer(t))
	done := make(chan error, 1)
	runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
		env.(*runEnv).fenced.Store(true)
		err := env.Journal().Put(ctx, "c1.0", []byte(`{}`))
		if err2 := env.SaveCheckpoint(ctx, []byte(`{}`)); err == nil || err2 == nil {
			err = errors.Join(err, err2, errors.New("not refused"))
		}
		done <- err
		return nil, errFenced
	})
	startWorker(t, nc, Config{Runner: runner})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	if _, err := c.Submit(ctx, &Job{ID: "fenced-j", Task: "x"}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, errFenced) {
			t.Fatalf("err = %v, want errFenced", err)
		}
	case <-ctx.Done():
		t.Fatal("runner never ran")
	}
}
