package jobs

import (
	"context"
	"fmt"
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

// TestMalformedCopyLeavesAnotherJobAlone: a hand-published message that is
// refused at the door but carries the id of another message's job (queued
// by a Client, running, or ended) is dead-lettered without touching that
// job: its state keeps its status and no dead event joins its events, and
// the job then runs (or stays ended) as it would have. It used to be
// marked dead, and a queued job's own message was then refused as a copy.
func TestMalformedCopyLeavesAnotherJobAlone(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		queue  string // of the real job
		task   string // of the real job
		before Status // the real job's status when the copy comes
	}{
		{"queued on another queue", "idle", "echo:real", StatusQueued},
		// The copy comes between the Client's state write and its publish.
		{"queued on the same queue", DefaultQueue, "echo:real", StatusQueued},
		{"running", DefaultQueue, "gate:go", StatusRunning},
		{"ended", DefaultQueue, "echo:done", StatusSucceeded},
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
			if tt.name == "queued on the same queue" {
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
			m.Data = []byte(`{"id":"victim","task":5}`)
			ack, err := js.PublishMsg(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			dl := deadLetterOf(ctx, t, js, c.names.DLQStream(), ack.Sequence)
			if got := dl.Headers().Get("Jetagent-Reason"); got != "job fails schemas/job.schema.json: at '/task': got number, want string" {
				t.Errorf("dead letter reason %q", got)
			}
			st, err := c.Status(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != tt.before {
				t.Fatalf("the copy changed the real job's state to %s (%q)", st.Status, st.Error)
			}
			switch tt.name {
			case "queued on the same queue": // the Client's publish
				if _, err := js.Publish(ctx, c.names.JobsSubject(tt.queue), mustJSON(real), jetstream.WithMsgID(id)); err != nil {
					t.Fatal(err)
				}
			case "running":
				r.release("go")
			case "queued on another queue": // a worker for its queue comes
				startWorker(t, nc, Config{Runner: r, Topology: TopologyConfig{AckWait: 2 * time.Second, MaxDeliver: 3, Queues: []string{"idle"}}})
			}
			if st := waitStatus(t, c, id); st.Status != StatusSucceeded || st.Queue != tt.queue {
				t.Errorf("real job ended %s on %q (%q), want succeeded on %q", st.Status, st.Queue, st.Error, tt.queue)
			}
			for _, ev := range streamMsgs(t, nc, c.names.EventsStream(), c.names.EventSubject(id, EventDead)) {
				t.Errorf("a dead event joined the real job's events: %s", ev.Data)
			}
		})
	}
}
