package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestHandPublishedJobsAreDeadLettered: a job published with the NATS
// protocol directly (not through a Client) that is not a job as given is
// dead-lettered with its reason, its state says dead with the same reason,
// and it never runs. Among them the bodies encoding/json would accept but
// change: a member name given twice (the last would win, while a check in
// another language may have read the first), bytes that are not UTF-8
// (each would become U+FFFD), a byte order mark, a task of white space
// only (minLength lets it through; the loop then failed it after it was
// taken, outside the dead-letter stream).
func TestHandPublishedJobsAreDeadLettered(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	r := newTestRunner()
	startWorker(t, nc, Config{Runner: r})
	c := newClient(t, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		body   string
		header map[string]string
		id     string // the job's id in the dead letter and the state ("": _seq-<seq>)
		want   string // the reason, whole
	}{
		{name: "missing task", body: `{"id":"hp-missing"}`, id: "hp-missing",
			want: "job fails schemas/job.schema.json: at '': missing property 'task'"},
		{name: "wrong types", body: `{"id":"hp-types","task":42,"max_rounds":"five"}`, id: "hp-types",
			want: "job fails schemas/job.schema.json: at '/max_rounds': got string, want integer; at '/task': got number, want string"},
		{name: "not JSON", body: `not json`,
			want: "job is not JSON: invalid character 'o' in literal null (expecting 'u')"},
		{name: "empty body", body: ``, want: "job is not JSON: the body is empty"},
		{name: "headers only", body: ``, header: map[string]string{"Nats-Msg-Id": "hp-headers", "X-Anything": "1"},
			id: "hp-headers", want: "job is not JSON: the body is empty"},
		{name: "an array", body: `[{"task":"echo:x"}]`, want: "job fails schemas/job.schema.json: at '': got array, want object"},
		{name: "trailing garbage", body: `{"id":"hp-trailing","task":"echo:x"} and more`,
			want: "job is not JSON: invalid character after top-level value"},
		{name: "task twice", body: `{"id":"hp-twice","task":"echo:checked","task":"echo:run"}`, id: "hp-twice",
			want: `job is not JSON: member "task" appears twice at ''`},
		{name: "nested member twice", body: `{"id":"hp-nested","task":"echo:x","metadata":{"k":"a","k":"b"}}`, id: "hp-nested",
			want: `job is not JSON: member "k" appears twice at '/metadata'`},
		{name: "member twice in history", id: "hp-history",
			body: `{"id":"hp-history","task":"echo:x","history":[{"role":"user","content":"a","content":"b"}]}`,
			want: `job is not JSON: member "content" appears twice at '/history/0'`},
		{name: "not UTF-8", body: "{\"id\":\"hp-utf8\",\"task\":\"echo:caf\xe9\"}", id: "hp-utf8",
			want: "job is not JSON: not valid UTF-8 (at byte 32)"},
		{name: "byte order mark", body: "\xef\xbb\xbf{\"id\":\"hp-bom\",\"task\":\"echo:x\"}",
			want: "job is not JSON: it starts with a UTF-8 byte order mark (send the JSON without it)"},
		{name: "white space task", body: `{"id":"hp-blank","task":" \t\n "}`, id: "hp-blank",
			want: "job fails schemas/job.schema.json: at '/task': only white space"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := natstest.Context(t)
			m := nats.NewMsg(c.names.JobsSubject(DefaultQueue))
			m.Data = []byte(tt.body)
			for k, v := range tt.header {
				m.Header.Set(k, v)
			}
			ack, err := js.PublishMsg(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			dl := deadLetterOf(ctx, t, js, c.names.DLQStream(), ack.Sequence)
			id := tt.id
			if id == "" {
				id = fmt.Sprintf("_seq-%d", ack.Sequence)
			}
			if got := dl.Headers().Get("Jetagent-Reason"); got != tt.want {
				t.Errorf("dead letter reason %q\nwant %q", got, tt.want)
			}
			if got := dl.Headers().Get("Jetagent-Job-Id"); got != id {
				t.Errorf("dead letter of job %q, want %q", got, id)
			}
			if string(dl.Data()) != tt.body {
				t.Errorf("dead letter body %q, want the original %q", dl.Data(), tt.body)
			}
			if st := waitStatus(t, c, id); st.Status != StatusDead || st.Error != tt.want {
				t.Errorf("state %s %q, want dead %q", st.Status, st.Error, tt.want)
			}
			if n := r.runCount(id); n != 0 {
				t.Errorf("the job ran %d times", n)
			}
		})
	}
}

// deadLetterOf waits for the dead letter of the job at stream sequence seq.
func deadLetterOf(ctx context.Context, t *testing.T, js jetstream.JetStream, stream string, seq uint64) jetstream.Msg {
	t.Helper()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint(seq)
	for {
		m, err := cons.Next(jetstream.FetchContext(ctx)) // waits for the next one, bounded by ctx
		if err != nil {
			t.Fatalf("no dead letter of stream sequence %d: %v", seq, err)
		}
		if m.Headers().Get("Jetagent-Stream-Seq") == want {
			return m
		}
	}
}

// TestDeadLetterHeadersInOrder: a dead letter republished with its
// headers and a new Nats-Msg-Id, dead-lettered again, keeps both ids
// under Jetagent-Original-Msg-Id, the earlier first, each time (the
// headers were copied in map order).
func TestDeadLetterHeadersInOrder(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	startWorker(t, nc, Config{Runner: newTestRunner()})
	c := newClient(t, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := natstest.Context(t)
	for i := range 20 {
		m := nats.NewMsg(c.names.JobsSubject(DefaultQueue))
		m.Data = []byte(`not json`)
		m.Header.Set("Jetagent-Original-Msg-Id", "first")
		m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("again-%d", i))
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		dl := deadLetterOf(ctx, t, js, c.names.DLQStream(), ack.Sequence)
		got := strings.Join(dl.Headers().Values("Jetagent-Original-Msg-Id"), " ")
		if want := fmt.Sprintf("first again-%d", i); got != want {
			t.Fatalf("Jetagent-Original-Msg-Id %q, want %q", got, want)
		}
	}
}

// TestCopyLeavesAnotherJobAlone: a hand-published message carrying the
// id of another message's job (queued by a Client, running, or ended) is
// dead-lettered without touching that job, whether it is refused at the
// door (malformed) or is a valid job: the real job's state keeps its
// status, no dead event joins its events, and it then runs its own task
// (or stays ended). A malformed copy used to mark a queued or running job
// dead, and a valid copy claimed a queued job's id and ran its own task
// under it; either way the real job's message was then refused as reusing
// the id.
func TestCopyLeavesAnotherJobAlone(t *testing.T) {
	t.Parallel()
	const malformed, valid = `{"id":"victim","task":5}`, `{"id":"victim","task":"echo:evil"}`
	for _, tt := range []struct {
		name   string
		queue  string // of the real job
		task   string // of the real job
		before Status // the real job's status when the copy comes
		copy   string
		reason string // of the copy's dead letter
	}{
		{"malformed, queued on another queue", "idle", "echo:real", StatusQueued, malformed, "job fails schemas/job.schema.json: at '/task': got number, want string"},
		// The copy comes between the Client's state write and its publish.
		{"malformed, queued on the same queue", DefaultQueue, "echo:real", StatusQueued, malformed, "job fails schemas/job.schema.json: at '/task': got number, want string"},
		{"malformed, running", DefaultQueue, "gate:real", StatusRunning, malformed, "job fails schemas/job.schema.json: at '/task': got number, want string"},
		{"malformed, ended", DefaultQueue, "echo:real", StatusSucceeded, malformed, "job fails schemas/job.schema.json: at '/task': got number, want string"},
		{"valid, queued on another queue", "idle", "echo:real", StatusQueued, valid,
			"another message with the same job id is queued (queue idle, submitted with Nats-Msg-Id victim): this copy is not run"},
		{"valid, queued on the same queue", DefaultQueue, "echo:real", StatusQueued, valid,
			"another message with the same job id is queued (queue default, submitted with Nats-Msg-Id victim): this copy is not run"},
		// Refused at once by the worker running the job (it was handed
		// back every ack wait while the job ran; a job running longer
		// than its deliveries lasted lost the copy without a dead letter).
		{"valid, running", DefaultQueue, "gate:real", StatusRunning, valid,
			"another message with the same job id is running (stream sequence 1): this copy is not run"},
		{"valid, ended", DefaultQueue, "echo:real", StatusSucceeded, valid, "job id reused: job id victim already ended (succeeded, stream sequence 1)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			nc := natstest.Connect(t, s)
			r := newTestRunner()
			startWorker(t, nc, Config{Runner: r, Concurrency: 2})
			c := newClient(t, nc)
			ctx := natstest.Context(t)
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			const id = "victim"
			real := &Job{ID: id, Task: tt.task, Queue: tt.queue}
			sameQueue := tt.before == StatusQueued && tt.queue == DefaultQueue
			if sameQueue {
				// What Client.Submit writes before it publishes.
				if _, err := c.states.update(ctx, id, func(*State) (*State, error) {
					return &State{ID: id, Queue: tt.queue, Status: StatusQueued, Task: tt.task, CreatedAt: time.Now().UTC()}, nil
				}); err != nil {
					t.Fatal(err)
				}
			} else if _, err := c.Submit(ctx, real); err != nil {
				t.Fatal(err)
			}
			if st := waitStatus(t, c, id, tt.before); st.Status != tt.before {
				t.Fatalf("real job %s", st.Status)
			}
			m := nats.NewMsg(c.names.JobsSubject(DefaultQueue))
			m.Data = []byte(tt.copy)
			ack, err := js.PublishMsg(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			dl := deadLetterOf(ctx, t, js, c.names.DLQStream(), ack.Sequence)
			if got := dl.Headers().Get("Jetagent-Reason"); !strings.HasPrefix(got, tt.reason) {
				t.Errorf("dead letter reason %q, want %q", got, tt.reason)
			}
			st, err := c.Status(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != tt.before {
				t.Fatalf("the copy changed the real job's state to %s (%q)", st.Status, st.Error)
			}
			switch {
			case sameQueue: // the Client's publish
				if _, err := js.Publish(ctx, c.names.JobsSubject(tt.queue), mustJSON(real), jetstream.WithMsgID(id)); err != nil {
					t.Fatal(err)
				}
			case tt.before == StatusRunning:
				r.release("real")
			case tt.queue == "idle": // a worker for its queue comes
				startWorker(t, nc, Config{Runner: r, Topology: TopologyConfig{AckWait: 2 * time.Second, MaxDeliver: 3, Queues: []string{"idle"}}})
			}
			st = waitStatus(t, c, id)
			if st.Status != StatusSucceeded || st.Queue != tt.queue || st.Result == nil || st.Result.Answer != "real" {
				t.Errorf("real job ended %s on %q (%q, result %+v), want succeeded on %q with its own answer",
					st.Status, st.Queue, st.Error, st.Result, tt.queue)
			}
			for _, ev := range streamMsgs(t, nc, c.names.EventsStream(), c.names.EventSubject(id, EventDead)) {
				t.Errorf("a dead event joined the real job's events: %s", ev.Data)
			}
		})
	}
}

// TestCopyOutOfDeliveriesIsDeadLettered: a copy with the id of another
// job whose deliveries run out is dead-lettered with the reason and the
// other's state is left alone. Once the other job had ended, the copy was
// deleted with no dead letter; while it was running, held until it ended.
func TestCopyOutOfDeliveriesIsDeadLettered(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		task   string // the real job's
		before Status // the real job's status when the copy's deliveries run out
	}{
		{"other ended", "echo:real", StatusSucceeded},
		{"other running", "gate:real", StatusRunning},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			nc := natstest.Connect(t, s)
			r := newTestRunner()
			startWorker(t, nc, Config{Runner: r})
			c := newClient(t, nc)
			ctx := natstest.Context(t)
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			const id = "victim"
			if _, err := c.Submit(ctx, &Job{ID: id, Task: tt.task}); err != nil {
				t.Fatal(err)
			}
			waitStatus(t, c, id, tt.before)
			// The copy waits on a queue no worker serves; its advisory is
			// the server's when its deliveries ran out on another queue's
			// consumer (the worker reads only the message's sequence).
			ack, err := js.Publish(ctx, c.names.JobsSubject("idle"), []byte(`{"id":"victim","task":"echo:evil"}`))
			if err != nil {
				t.Fatal(err)
			}
			adv, err := json.Marshal(maxDeliveriesAdvisory{Stream: c.names.JobsStream(), Consumer: c.names.Consumer("idle"), StreamSeq: ack.Sequence, Deliveries: 3})
			if err != nil {
				t.Fatal(err)
			}
			subj := strings.TrimSuffix(c.names.AdvisorySubject(), "*") + c.names.Consumer("idle")
			if _, err := js.Publish(ctx, subj, adv); err != nil {
				t.Fatal(err)
			}
			dl := deadLetterOf(ctx, t, js, c.names.DLQStream(), ack.Sequence)
			want := fmt.Sprintf("another message with the same job id (stream sequence 1, %s) holds the id: this copy was not run", tt.before)
			if got := dl.Headers().Get("Jetagent-Reason"); !strings.Contains(got, want) {
				t.Errorf("dead letter reason %q, want it to say %q", got, want)
			}
			if st, err := c.Status(ctx, id); err != nil || st.Status != tt.before {
				t.Fatalf("real job's state after the copy: %+v, %v, want %s", st, err, tt.before)
			}
			if tt.before == StatusRunning {
				r.release("real")
				if st := waitStatus(t, c, id); st.Status != StatusSucceeded || st.Result == nil || st.Result.Answer != "real" {
					t.Errorf("real job ended %s (%q), want succeeded with its own answer", st.Status, st.Error)
				}
			}
		})
	}
}

// TestPublisherCannotForgeDeadLetterHeaders: a publisher's headers named
// like the ones the worker sets on a dead letter, in any case, are kept
// under Jetagent-Original-*: a forged Jetagent-Body-Ref pointed a reader
// at another job's object, and "jetagent-reason" stood beside the real
// reason.
func TestPublisherCannotForgeDeadLetterHeaders(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	startWorker(t, nc, Config{Runner: newTestRunner()})
	c := newClient(t, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := natstest.Context(t)
	m := nats.NewMsg(c.names.JobsSubject(DefaultQueue))
	m.Data = []byte(`{"id":"forge","task":`)
	for k, v := range map[string]string{
		"Jetagent-Body-Ref":        "AGENT_TRANSCRIPTS/other",
		"jetagent-reason":          "all fine, ignore",
		"JETAGENT-JOB-ID":          "other",
		"jetagent-original-msg-id": "first",
		"Traceparent":              "kept",
	} {
		m.Header[k] = []string{v}
	}
	m.Header.Set(nats.MsgIdHdr, "second")
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	h := deadLetterOf(ctx, t, js, c.names.DLQStream(), ack.Sequence).Headers()
	// By these names, in any case, only the worker's own (one each).
	for k := range h {
		switch strings.ToLower(k) {
		case "jetagent-body-ref", "jetagent-reason", "jetagent-job-id":
			if _, worker := map[string]bool{"Jetagent-Reason": true, "Jetagent-Job-Id": true}[k]; !worker || len(h[k]) != 1 {
				t.Errorf("dead letter header %s: %q, the publisher's", k, h[k])
			}
		}
	}
	for k, want := range map[string]string{
		"Jetagent-Original-Body-Ref": "AGENT_TRANSCRIPTS/other",
		"Jetagent-Original-Reason":   "all fine, ignore",
		"Jetagent-Original-Job-Id":   "other",
		"Jetagent-Original-Msg-Id":   "first second",
		"Traceparent":                "kept",
		"Jetagent-Job-Id":            "second", // the body is no JSON: its Nats-Msg-Id names it
	} {
		if got := strings.Join(h.Values(k), " "); got != want {
			t.Errorf("dead letter header %s = %q, want %q", k, got, want)
		}
	}
	if r := h.Get("Jetagent-Reason"); r == "" || r == "all fine, ignore" {
		t.Errorf("Jetagent-Reason %q, want the worker's", r)
	}
}

// settlingKV is a state bucket whose write of a succeeded state is stored
// and then held until release closes: an attempt between its final state
// and its end (the terminal event, the ack).
type settlingKV struct {
	jetstream.KeyValue
	stored, release chan struct{}
	once            sync.Once
}

func (k *settlingKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	rev, err := k.KeyValue.Update(ctx, key, value, last)
	if err == nil && strings.Contains(string(value), `"status":"succeeded"`) {
		k.once.Do(func() { close(k.stored) })
		<-k.release
	}
	return rev, err
}

// TestCopyWhileTheJobSettles: a copy of a job that comes once the job's
// final state is stored, while its attempt is still ending, is refused as
// reusing an ended job's id (what any later copy is told), not as a copy
// of a running job, which the state no longer says (seen as a flaky
// TestCopyLeavesAnotherJobAlone "valid, ended" under -race -count=3).
func TestCopyWhileTheJobSettles(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	kv := &settlingKV{stored: make(chan struct{}), release: make(chan struct{})}
	startWorkerWith(t, nc, Config{Runner: newTestRunner(), Concurrency: 2}, func(w *Worker) {
		w.stateKV = func(b jetstream.KeyValue) jetstream.KeyValue { kv.KeyValue = b; return kv }
	})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	const id = "settling"
	if _, err := c.Submit(ctx, &Job{ID: id, Task: "echo:real"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-kv.stored:
	case <-ctx.Done():
		t.Fatal("the job's final state was not written")
	}
	defer close(kv.release)
	m := nats.NewMsg(c.names.JobsSubject(DefaultQueue))
	m.Data = []byte(`{"id":"` + id + `","task":"echo:evil"}`)
	ack, err := c.topo.JS.PublishMsg(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	dl := deadLetterOf(ctx, t, c.topo.JS, c.names.DLQStream(), ack.Sequence)
	if got, want := dl.Headers().Get("Jetagent-Reason"), "job id reused: job id settling already ended (succeeded, stream sequence 1)"; !strings.HasPrefix(got, want) {
		t.Errorf("dead letter reason %q, want %q", got, want)
	}
}
