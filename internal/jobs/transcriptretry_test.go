package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// A transcript store whose first request is lost (a cluster node killed
// with it in flight; a stream without a leader for a moment after a node
// came back answered "no response from stream" at once) costs one try,
// not the transcript: the job used to end succeeded without one, on every
// job of a 3-node cluster whose quorum came back (a probe with stock
// nats-servers). The first attempt stores its transcripts asynchronously,
// a later one with ObjectStore.Put; both are tried again.
func TestTranscriptStoreLostRequestIsRetried(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		attempt int // the attempt that stores the transcripts
	}{
		{"first attempt", 1},
		{"later attempt", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			bucket := (Names{Prefix: DefaultPrefix}).TranscriptBucket()
			p := startDropProxy(t, s.Addr().String(), dropMatching("$O."+bucket+".C.", false))
			wnc, err := nats.Connect(p.url(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(wnc.Close)
			go func() {
				// The server "restarted" with the request: a read cut
				// short would leave the connection misframed.
				select {
				case <-p.dropped:
					p.cut()
				case <-t.Context().Done():
				}
			}()
			r := newTestRunner()
			log, rec := recordingLog(logFinished)
			// An ack wait above the lost try: a redelivery meanwhile would
			// be handed back, counting one more attempt.
			startWorker(t, wnc, Config{Runner: RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
				if env.Attempt() < tc.attempt {
					return nil, Retryable(errors.New("provider overloaded"))
				}
				p.dropping.Store(true)
				return r.Run(ctx, job, env)
			}), WorkerID: "w1", Logger: log,
				Topology: TopologyConfig{AckWait: 3 * stateTryTimeout, MaxDeliver: 3}})
			c := newClient(t, natstest.Connect(t, s))
			ctx := natstest.Context(t)
			id := "tr-" + string(rune('0'+tc.attempt))
			if _, err := c.Submit(ctx, &Job{ID: id, Task: "echo:hello"}); err != nil {
				t.Fatal(err)
			}
			st := waitStatus(t, c, id)
			select {
			case <-p.dropped:
			default:
				t.Fatal("no transcript request was swallowed")
			}
			if st.Status != StatusSucceeded || st.Attempt != tc.attempt {
				t.Fatalf("state %s attempt %d (%s)", st.Status, st.Attempt, st.Error)
			}
			if st.Result == nil || st.Result.Transcript != TranscriptName(id) {
				t.Errorf("the result names no transcript (logged %v)", rec.msgs)
			}
			for _, raw := range []bool{false, true} {
				b, err := c.Transcript(ctx, id, raw)
				if err != nil {
					t.Fatalf("transcript (raw %v): %v", raw, err)
				}
				var tr Transcript
				if err := json.Unmarshal(b, &tr); err != nil || tr.JobID != id || tr.Attempt != tc.attempt {
					t.Errorf("transcript (raw %v) of %q attempt %d: %v", raw, tr.JobID, tr.Attempt, err)
				}
			}
			if rec.logged("transcript store failed") {
				t.Error("logged that the transcript store failed")
			}
		})
	}
}

// TestTranscriptErrorKept: transcripts that cannot be stored (the bucket
// full: an operator's max_bytes, seen with a stock nats-server) leave the
// job succeeded without them, and the result now says why
// (transcript_error); submit transcript said only "without a transcript".
func TestTranscriptErrorKept(t *testing.T) {
	t.Parallel()
	nc, topo := startTopology(t)
	ctx := natstest.Context(t)
	editStream(t, topo.JS, "OBJ_"+(Names{Prefix: DefaultPrefix}).TranscriptBucket(), func(c *jetstream.StreamConfig) { c.MaxBytes = 1024 })
	startWorker(t, nc, Config{Runner: newTestRunner(), UnservedCheck: -1})
	c := newClient(t, nc)
	if _, err := c.Submit(ctx, &Job{ID: "no-room", Task: "echo:" + strings.Repeat("t", 4096)}); err != nil {
		t.Fatal(err)
	}
	st := waitStatus(t, c, "no-room")
	if st.Status != StatusSucceeded || st.Result == nil || st.Result.Transcript != "" ||
		!strings.Contains(st.Result.TranscriptError, "maximum bytes exceeded") {
		t.Fatalf("state %s, result %+v; want succeeded, no transcript and why", st.Status, st.Result)
	}
}
