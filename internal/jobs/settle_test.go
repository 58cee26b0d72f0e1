package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/natstest"
)

// waitDeadLetter waits for the dead letter of job id and returns it.
func waitDeadLetter(t *testing.T, nc *nats.Conn, c *Client, id string) *jetstream.RawStreamMsg {
	t.Helper()
	ctx := natstest.Context(t)
	js, _ := jetstream.New(nc)
	cons, err := js.OrderedConsumer(ctx, c.names.DLQStream(), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		m, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			t.Fatalf("no dead letter of %s: %v", id, err)
		}
		if m.Headers().Get("Jetagent-Job-Id") == id {
			md, _ := m.Metadata()
			raw, err := js.Stream(ctx, c.names.DLQStream())
			if err != nil {
				t.Fatal(err)
			}
			rm, err := raw.GetMsg(ctx, md.Sequence.Stream)
			if err != nil {
				t.Fatal(err)
			}
			return rm
		}
	}
}

// A job one byte under what the stream accepts, with no headers, is
// refused (too large) and dead-lettered all the same: its dead-letter copy
// could not carry the body beside the reason, so the body is stored in the
// transcript bucket and the dead letter points at it. It settles at once,
// not after MaxDeliver handings back.
func TestJobAtTheStreamLimitIsDeadLettered(t *testing.T) {
	t.Parallel()
	const maxPayload = 64 << 10
	nc := natstest.Connect(t, startSmallServer(t, maxPayload))
	startWorker(t, nc, Config{Runner: newTestRunner()})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	head, tail := `{"id":"at-limit","task":"`, `"}`
	payload := []byte(head + strings.Repeat("t", maxPayload-1-len(head)-len(tail)) + tail)
	js, _ := jetstream.New(nc)
	if _, err := js.Publish(ctx, "agent.jobs.default", payload); err != nil {
		t.Fatalf("the stream refused the job: %v", err)
	}
	st := waitStatus(t, c, "at-limit")
	if st.Status != StatusDead || st.Attempt != 1 || !strings.Contains(st.Error, "too large") {
		t.Fatalf("state %+v", st)
	}
	dl := waitDeadLetter(t, nc, c, "at-limit")
	ref := dl.Header.Get("Jetagent-Body-Ref")
	if ref != c.names.TranscriptBucket()+"/"+DeadLetterBodyName("at-limit", st.StreamSeq) {
		t.Fatalf("dead letter headers %v", dl.Header)
	}
	var body struct {
		BodyRef DataRef `json:"body_ref"`
	}
	if err := json.Unmarshal(dl.Data, &body); err != nil || body.BodyRef.Bytes != len(payload) {
		t.Fatalf("dead letter body %s: %v", dl.Data, err)
	}
	stored, err := c.topo.Transcripts.GetBytes(ctx, body.BodyRef.Name)
	if err != nil || !bytes.Equal(stored, payload) {
		t.Fatalf("stored body: %d bytes, %v", len(stored), err)
	}
}

// Every message the stream accepted settles with a visible outcome, even
// when its id is taken: a job without an id gets a generated id no
// submitter can choose; a submitted id of that form is refused; a second
// message with the id of a finished job is dead-lettered with the reason
// (not dropped with a log line), and the finished job is left alone.
func TestTakenIdsAreRefusedVisibly(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, startServer(t))
	startWorker(t, nc, Config{Runner: newTestRunner(), Concurrency: 1})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	js, _ := jetstream.New(nc)
	publish := func(body string) uint64 {
		t.Helper()
		ack, err := js.Publish(ctx, "agent.jobs.default", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}

	// A submitted id in the generated form, naming a sequence to come.
	squat := publish(`{"id":"_seq-3","task":"echo:squatter"}`)
	first := publish(`{"task":"echo:no id"}`)        // sequence 2
	third := publish(`{"task":"echo:no id either"}`) // sequence 3: the squatted id
	for _, seq := range []uint64{first, third} {
		st := waitStatus(t, c, GeneratedID(seq))
		if st.Status != StatusSucceeded || !strings.HasPrefix(st.Result.Answer, "no id") {
			t.Errorf("job %s: %+v", GeneratedID(seq), st)
		}
	}
	if st := waitStatus(t, c, GeneratedID(squat)); st.Status != StatusDead || !strings.Contains(st.Error, "/id") {
		t.Errorf("squatter: %+v", st)
	}

	// The same id again after the job finished: refused, visibly.
	if _, err := c.Submit(ctx, &Job{ID: "once", Task: "echo:first"}); err != nil {
		t.Fatal(err)
	}
	if st := waitStatus(t, c, "once"); st.Status != StatusSucceeded {
		t.Fatalf("first: %+v", st)
	}
	again := publish(`{"id":"once","task":"echo:second"}`)
	dl := waitDeadLetter(t, nc, c, "once")
	if reason := dl.Header.Get("Jetagent-Reason"); !strings.Contains(reason, "already ended (succeeded") ||
		dl.Header.Get("Jetagent-Stream-Seq") != jsonNumber(again) {
		t.Errorf("dead letter %v", dl.Header)
	}
	if st := waitStatus(t, c, "once"); st.Status != StatusSucceeded || st.Result.Answer != "first" {
		t.Errorf("the finished job changed: %+v", st)
	}
}

func jsonNumber(n uint64) string { b, _ := json.Marshal(n); return string(b) }

// The checkpoint goes only once the final state is stored: an attempt
// whose final state cannot be written (here another attempt took the job
// over) leaves it, so the attempt that finishes the job resumes instead of
// repeating every call.
func TestCheckpointKeptUntilTheFinalStateIsStored(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, startServer(t))
	done := make(chan struct{})
	runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
		defer close(done)
		if err := env.SaveCheckpoint(ctx, []byte(`{"round":3}`)); err != nil {
			return nil, err
		}
		js, _ := jetstream.New(env.Conn())
		kv, err := js.KeyValue(ctx, env.Names().StateBucket())
		if err != nil {
			return nil, err
		}
		st := State{ID: job.ID, Status: StatusRunning, Attempt: 2, Worker: "other", UpdatedAt: time.Now()}
		if _, err := kv.Put(ctx, job.ID, mustJSON(st)); err != nil {
			return nil, err
		}
		return &Outcome{Result: agentloop.Result{Answer: "done"}}, nil
	})
	reg := prometheus.NewRegistry()
	metrics, _ := NewMetrics(reg)
	startWorker(t, nc, Config{Runner: runner, Metrics: metrics})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	if _, err := c.Submit(ctx, &Job{ID: "keep-cp", Task: "x"}); err != nil {
		t.Fatal(err)
	}
	<-done
	// The attempt ends as lost once settle has given up on the state.
	for ctx.Err() == nil {
		if _, lost := gaugeAndLost(t, reg); lost == 1 {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond): // polling a registry: there is no signal to wait on
		}
	}
	if ent, err := c.topo.Journal.Get(ctx, checkpointKey("keep-cp")); err != nil || string(ent.Value()) != `{"round":3}` {
		t.Errorf("checkpoint %v, %v; want it kept", ent, err)
	}
}
