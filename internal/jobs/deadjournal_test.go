package jobs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/natstest"
)

// journalLeft returns the journal keys of job id still stored, and the
// objects of its entries still stored of names.
func journalLeft(t *testing.T, c *Client, id string, names ...string) []string {
	t.Helper()
	ctx := natstest.Context(t)
	w, err := c.topo.Journal.WatchFiltered(ctx, []string{id + ".>"}, jetstream.IgnoreDeletes())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop() //nolint:errcheck
	var left []string
	for e := range w.Updates() {
		if e == nil {
			break
		}
		left = append(left, "key "+e.Key())
	}
	for _, name := range names {
		if _, err := c.topo.Transcripts.GetInfo(ctx, name); !errors.Is(err, jetstream.ErrObjectNotFound) {
			left = append(left, fmt.Sprintf("object %s (%v)", name, err))
		}
	}
	return left
}

// Every way a job ends for good takes its call journal with it once its
// state is final — the keys and the objects of entries too long for a KV
// value. A dead-lettered job's journal used to stay until the bucket's
// 7-day TTL (and its objects for ever: the transcript bucket has none):
// only a job that succeeded, failed or was cancelled while it ran was
// purged. Nothing reads a dead job's journal again: a dead letter
// republished under the job's id is refused as reusing it ("replayed from
// the dead-letter stream" below), so there is no resume to keep it for.
func TestTerminalJobsLeaveNoJournal(t *testing.T) {
	t.Parallel()
	// Servers of a small max_payload: an entry over it goes to an object.
	const maxPayload = 64 << 10
	long := append([]byte(`{"kind":"done","x":"`), append(bytes.Repeat([]byte("y"), 2*maxPayload), '"', '}')...)
	for _, tc := range []struct {
		name string
		want Status
		// end is what attempt 1 does once it journaled: "ok", "fail",
		// "retry" (a retryable error), "block" (until its context ends).
		end string
		// then is what the test does once attempt 1 journaled: "cancel"
		// (a cancel request), "fence" (the attempt loses its job: no ack
		// ever, the server's advisory dead-letters it), "cancel queued"
		// (a cancel while the job is handed back), "replay" (once dead,
		// its dead letter is published again).
		then       string
		maxDeliver int
		// waitLog: the purge is done once the worker logged this (no
		// terminal event of the worker's to wait on).
		waitLog string
	}{
		{name: "succeeded", want: StatusSucceeded, end: "ok"},
		{name: "failed", want: StatusFailed, end: "fail"},
		{name: "cancelled while it runs", want: StatusCancelled, end: "block", then: "cancel"},
		{name: "dead after its last retry", want: StatusDead, end: "retry"},
		{name: "dead from the max deliveries advisory", want: StatusDead, end: "block", then: "fence", maxDeliver: 1},
		{name: "cancelled while handed back", want: StatusCancelled, end: "retry", then: "cancel queued", waitLog: "not running job"},
		{name: "replayed from the dead-letter stream", want: StatusDead, end: "retry", then: "replay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := "tj-" + strings.ReplaceAll(tc.name, " ", "-")
			nc := natstest.Connect(t, startSmallServer(t, maxPayload))
			var runs atomic.Int32
			journaled := make(chan struct{}, 1)
			// Attempt 1 goes on once the test saw its journal: a job that
			// ends at once could be purged before the test looks.
			proceed := make(chan struct{})
			runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
				runs.Add(1)
				if env.Attempt() == 1 {
					// A runner that never loads the journal: the worker
					// must find the objects to delete from the entries.
					for k, v := range map[string][]byte{"c1.0": []byte(`{"kind":"intent"}`), "c1.1": long} {
						if err := env.Journal().Put(ctx, k, v); err != nil {
							return nil, err
						}
					}
					journaled <- struct{}{}
					select {
					case <-proceed:
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				}
				switch tc.end {
				case "fail":
					return nil, errors.New("bad task")
				case "retry":
					return nil, Retryable(errors.New("provider overloaded"))
				case "block":
					<-ctx.Done()
					return nil, ctx.Err()
				}
				return &Outcome{Result: agentloop.Result{Answer: "ok"}}, nil
			})
			cfg := Config{Runner: runner, Concurrency: 1, Topology: TopologyConfig{AckWait: 2 * time.Second, MaxDeliver: 3}}
			if tc.maxDeliver != 0 {
				cfg.Topology.MaxDeliver = tc.maxDeliver
			}
			if tc.then == "cancel queued" {
				// Long enough for the cancel to find the job handed back.
				cfg.RetryDelay, cfg.RetryDelayMax = 2*time.Second, 2*time.Second
			}
			var logged <-chan struct{}
			if tc.waitLog != "" {
				cfg.Logger, logged = logSignal(tc.waitLog)
			}
			w, _ := startWorker(t, nc, cfg)
			c := newClient(t, nc)
			ctx := natstest.Context(t)
			rc, err := c.Submit(ctx, &Job{ID: id, Task: "x"})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-journaled:
			case <-ctx.Done():
				t.Fatal("attempt 1 did not journal")
			}
			if _, err := c.topo.Transcripts.GetInfo(ctx, JournalObjectName(id, "c1.1")); err != nil {
				t.Fatalf("the long entry is not an object: %v", err)
			}
			close(proceed)
			switch tc.then {
			case "cancel":
				if _, err := c.Cancel(ctx, id); err != nil {
					t.Fatal(err)
				}
			case "fence":
				w.mu.Lock()
				r := w.running[id]
				w.mu.Unlock()
				r.fence(errors.New("test: cut off"))
			case "cancel queued":
				waitStatus(t, c, id, StatusQueued)
				if st, err := c.Cancel(ctx, id); err != nil || st.Status != StatusCancelled {
					t.Fatalf("cancel: %+v, %v", st, err)
				}
			}
			st := waitStatus(t, c, id)
			if st.Status != tc.want {
				t.Fatalf("state %s (%s), want %s", st.Status, st.Error, tc.want)
			}
			if logged != nil {
				select {
				case <-logged:
				case <-ctx.Done():
					t.Fatalf("no %q logged", tc.waitLog)
				}
			} else {
				// The purge precedes the terminal event.
				watchEvents(t, c, rc.ID)
			}
			if left := journalLeft(t, c, id, JournalObjectName(id, "c1.1")); len(left) > 0 {
				t.Errorf("left after the job ended %s: %v", st.Status, left)
			}
			if tc.then != "replay" {
				return
			}
			// An operator publishes the dead letter again: refused as a
			// copy of a job that ended (no attempt, so no journal to keep).
			dl := waitDeadLetter(t, nc, c, id)
			refused := make(chan *jetstream.RawStreamMsg, 1)
			go func() { refused <- waitDeadLetterAfter(t, c, id, dl.Sequence) }()
			ran := runs.Load()
			if _, err := c.topo.JS.Publish(ctx, c.names.JobsSubject(DefaultQueue), dl.Data); err != nil {
				t.Fatal(err)
			}
			again := <-refused
			if again == nil {
				return
			}
			if reason := again.Header.Get("Jetagent-Reason"); !strings.Contains(reason, "already ended (dead") {
				t.Errorf("republished dead letter refused with %q", reason)
			}
			if n := runs.Load(); n != ran {
				t.Errorf("the republished job ran (%d runs, %d before)", n, ran)
			}
			if cur, _, err := c.states.get(ctx, id); err != nil || cur.Status != StatusDead || cur.StreamSeq != st.StreamSeq {
				t.Errorf("state after the republish %+v, %v", cur, err)
			}
		})
	}
}

// waitDeadLetterAfter waits for a dead letter of job id stored after
// stream sequence seq of the dead-letter stream.
func waitDeadLetterAfter(t *testing.T, c *Client, id string, seq uint64) *jetstream.RawStreamMsg {
	ctx := natstest.Context(t)
	cons, err := c.topo.JS.OrderedConsumer(ctx, c.names.DLQStream(), jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: seq + 1,
	})
	if err != nil {
		t.Error(err)
		return nil
	}
	s, err := c.topo.JS.Stream(ctx, c.names.DLQStream())
	if err != nil {
		t.Error(err)
		return nil
	}
	for {
		m, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			t.Errorf("no second dead letter of %s: %v", id, err)
			return nil
		}
		if m.Headers().Get("Jetagent-Job-Id") == id {
			md, _ := m.Metadata()
			rm, err := s.GetMsg(ctx, md.Sequence.Stream)
			if err != nil {
				t.Error(err)
			}
			return rm
		}
	}
}
