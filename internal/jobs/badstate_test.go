package jobs

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestBadStateDeadLettered: a job whose state is not a job state (nats kv
// put AGENT_STATE ID 'not json{', or another program's value) kept its
// last delivery for ever, the claim failing every second ("state of ID:
// invalid character ..."), taken for a store that did not answer. Whether
// the job ran cannot be told, so it is dead-lettered unrun, the bad value
// quoted in the reason and the state replaced by a dead one.
func TestBadStateDeadLettered(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	r := newTestRunner()
	startWorker(t, nc, Config{Runner: r, UnservedCheck: -1})
	c := newClient(t, nc)
	tests := []struct {
		id, state, want string
	}{
		{"bad-json", "not json{", `(invalid character 'o' in literal null (expecting 'u')): "not json{"`},
		{"bad-type", `{"id":"bad-type","status":"running","attempt":"two"}`, "cannot unmarshal string"},
		{"bad-status", `{"id":"bad-status","status":"bogus"}`, `(status "bogus" is none of a job's)`},
		{"empty-object", `{}`, `(status "" is none of a job's): "{}"`},
		{"long", strings.Repeat("x", 5000), `"` + strings.Repeat("x", 120) + `..."`},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			ctx := natstest.Context(t)
			if _, err := c.topo.State.Put(ctx, tt.id, []byte(tt.state)); err != nil {
				t.Fatal(err)
			}
			// As any publisher would (nats pub): Client.Submit reads the state.
			if err := nc.Publish(c.names.JobsSubject(DefaultQueue), []byte(`{"id":"`+tt.id+`","task":"echo:x"}`)); err != nil {
				t.Fatal(err)
			}
			st := waitStatus(t, c, tt.id)
			if st.Status != StatusDead || !strings.Contains(st.Error, "the state of "+tt.id+" is not a job state") ||
				!strings.Contains(st.Error, tt.want) || !strings.Contains(st.Error, "nats kv del AGENT_STATE "+tt.id) {
				t.Errorf("state %s %q; want dead, saying %q", st.Status, st.Error, tt.want)
			}
			if n := r.runCount(tt.id); n != 0 {
				t.Errorf("ran %d times", n)
			}
			var dead int
			for _, m := range streamMsgs(t, nc, c.names.DLQStream(), c.names.DLQSubject(DefaultQueue)) {
				if m.Header.Get("Jetagent-Job-Id") == tt.id {
					dead++
				}
			}
			if dead != 1 {
				t.Errorf("%d dead letters, want 1", dead)
			}
		})
	}
}

// TestBadStateWhileRunning: a running job's state overwritten with one
// that is not a job state. The attempt that claimed the job puts its own
// back and settles or hands back the job as usual (its outcome was lost
// as another attempt's); an attempt that cannot (fenced, its worker gone)
// leaves the job to the max-deliveries advisory, which dead-letters it
// with the bad value in the reason instead of being handled again for
// ever.
func TestBadStateWhileRunning(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		topo  TopologyConfig
		cut   bool // no heartbeat gets through: the attempt fences itself
		retry bool // the attempt ends with a retryable error
		check func(t *testing.T, st *State)
	}{
		{"settled", testTopology(), false, false, func(t *testing.T, st *State) {
			if st.Status != StatusSucceeded || st.Attempt != 1 {
				t.Errorf("state %s %q attempt %d; want succeeded by attempt 1", st.Status, st.Error, st.Attempt)
			}
		}},
		{"handed back", testTopology(), false, true, func(t *testing.T, st *State) {
			if st.Status != StatusSucceeded || st.Attempt != 2 {
				t.Errorf("state %s %q attempt %d; want succeeded by attempt 2", st.Status, st.Error, st.Attempt)
			}
		}},
		{"max deliveries", TopologyConfig{AckWait: 2 * time.Second, MaxDeliver: 1}, true, false, func(t *testing.T, st *State) {
			if st.Status != StatusDead || !strings.Contains(st.Error, "max deliveries exhausted") ||
				!strings.Contains(st.Error, `is not a job state (invalid character 'o' in literal null (expecting 'u')): "not json{"`) {
				t.Errorf("state %s %q; want dead, the bad state in the reason", st.Status, st.Error)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			nc := natstest.Connect(t, s)
			ctx := natstest.Context(t)
			started := make(chan int, 4)
			release := make(chan struct{})
			runner := firstAttemptGated(release, started, tt.retry)
			startWorkerWith(t, nc, Config{Runner: runner, UnservedCheck: -1, Topology: tt.topo}, func(w *Worker) {
				if tt.cut {
					w.hbFault = func() (bool, bool) { return false, false }
				}
			})
			c := newClient(t, nc)
			const id = "overwritten"
			if _, err := c.Submit(ctx, &Job{ID: id, Task: "x"}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-started:
			case <-ctx.Done():
				t.Fatal("the job did not start")
			}
			if _, err := c.topo.State.Put(ctx, id, []byte("not json{")); err != nil {
				t.Fatal(err)
			}
			if !tt.cut { // a cut-off attempt runs until it fences itself
				close(release)
			}
			tt.check(t, waitStatus(t, c, id))
		})
	}
}

// TestSubmitOverBadState: Client.Submit of an id whose state is not a job
// state says so and how to go on; it was "state store unavailable", after
// ten seconds of tries.
func TestSubmitOverBadState(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	ctx := natstest.Context(t)
	startWorker(t, nc, Config{Runner: newTestRunner(), UnservedCheck: -1})
	c := newClient(t, nc)
	if _, err := c.topo.State.Put(ctx, "taken", []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	_, err := c.Submit(ctx, &Job{ID: "taken", Task: "x"})
	want := `the state of taken is not a job state (invalid character 'g' looking for beginning of value): "garbage": ` +
		"submit it under another id, or delete the key first (nats kv del AGENT_STATE taken)"
	if err == nil || err.Error() != want || errors.Is(err, errStateUnavailable) {
		t.Fatalf("got %v, want %q", err, want)
	}
}

// TestBadStateKeptWhileTheCopyFails: the bad state is replaced only once
// the job's dead letter is stored. Replaced first, a copy that then failed
// (the DLQ refusing it: an operator's max_msg_size, a full store) left a
// queued state of the message, and its next delivery ran the job.
func TestBadStateKeptWhileTheCopyFails(t *testing.T) {
	t.Parallel()
	nc, topo := startTopology(t)
	ctx := natstest.Context(t)
	js := topo.JS
	open := editStream(t, js, (Names{Prefix: DefaultPrefix}).DLQStream(), func(c *jetstream.StreamConfig) {
		c.MaxMsgSize = 10 // every copy refused
	})
	r := newTestRunner()
	rec, log := newRecordLog()
	startWorker(t, nc, Config{Runner: r, Logger: log, UnservedCheck: -1, AssetCheck: -1})
	c := newClient(t, nc)
	const id = "bad-no-dlq"
	if _, err := c.topo.State.Put(ctx, id, []byte("not json{")); err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(c.names.JobsSubject(DefaultQueue), []byte(`{"id":"`+id+`","task":"echo:x"}`)); err != nil {
		t.Fatal(err)
	}
	// Every delivery refused again, up to the last one, which is kept.
	if _, err := rec.wait(ctx, "the job's last delivery cannot be settled; keeping it"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.UpdateStream(ctx, open); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, c, id)
	if st.Status != StatusDead || !strings.Contains(st.Error, "is not a job state") {
		t.Errorf("state %s %q; want dead for its bad state", st.Status, st.Error)
	}
	if n := r.runCount(id); n != 0 {
		t.Errorf("ran %d times", n)
	}
}
