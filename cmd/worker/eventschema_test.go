package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/schemas"
)

// Events a test saw, checked against schemas/event.schema.json (issue 9
// point 10: every event of the fault tests matches its schema).

// storedEvent is one event as the events stream holds it.
type storedEvent struct {
	StreamSeq uint64
	Subject   string
	Raw       []byte
	jobs.Event
}

func (e storedEvent) String() string {
	return fmt.Sprintf("#%d %s@%d.%d/r%d/%s", e.StreamSeq, e.Type, e.Attempt, e.Seq, e.Round, e.Worker)
}

// eventValidator holds the embedded schemas compiled once (formats
// asserted), the same jobs.Validator the door uses for jobs.
var eventValidator = sync.OnceValues(func() (*jobs.Validator, error) { return jobs.NewValidator(0) })

// eventsStream is the events stream of the default prefix.
func eventsStream(t *testing.T, ctx context.Context, nc *nats.Conn) jetstream.Stream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, jobs.Names{}.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

// readJobEvents returns every stored event of job id, in stream order.
func readJobEvents(t *testing.T, ctx context.Context, nc *nats.Conn, id string) []storedEvent {
	t.Helper()
	names := jobs.Names{}
	stream := eventsStream(t, ctx, nc)
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{names.EventsFilter(id)}})
	if err != nil {
		t.Fatal(err)
	}
	var out []storedEvent
	for {
		batch, err := cons.FetchNoWait(256)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			e := storedEvent{StreamSeq: md.Sequence.Stream, Subject: m.Subject(), Raw: append([]byte(nil), m.Data()...)}
			if err := json.Unmarshal(m.Data(), &e.Event); err != nil {
				t.Errorf("event %s is not a jobs.Event: %v\n%s", m.Subject(), err, m.Data())
			}
			out = append(out, e)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			t.Fatal(err)
		}
		if n == 0 {
			return out
		}
	}
}

// readSettledJobEvents is readJobEvents of a job whose state is final,
// once its terminal event is stored. The worker writes the final state
// first and publishes the terminal event after it (jobs.Worker.settle), so
// events read as soon as Client.Wait returns may lack it; every other event
// of the attempt is stored before the state.
func readSettledJobEvents(t *testing.T, ctx context.Context, nc *nats.Conn, id string) []storedEvent {
	t.Helper()
	names := jobs.Names{}
	stream := eventsStream(t, ctx, nc)
	var terminal []string
	for _, s := range []jobs.Status{jobs.StatusSucceeded, jobs.StatusFailed, jobs.StatusCancelled, jobs.StatusDead} {
		terminal = append(terminal, names.EventSubject(id, string(s)))
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: terminal})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cons.Next(jetstream.FetchContext(ctx)); err != nil {
		t.Fatalf("no terminal event of %s: %v", id, err)
	}
	return readJobEvents(t, ctx, nc, id)
}

// checkEventSchemas fails the test for each event that does not match
// schemas/event.schema.json, or whose subject does not name its job and
// type (agent.events.<job_id>.<type>).
func checkEventSchemas(t *testing.T, evs []storedEvent) {
	t.Helper()
	v, err := eventValidator()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if err := v.Validate(schemas.Event, e.Raw); err != nil {
			t.Errorf("event %s does not match %s: %v\n%s", e, schemas.Event, err, e.Raw)
		}
		if want := (jobs.Names{}).EventSubject(e.JobID, e.Type); e.Subject != want {
			t.Errorf("event %s published on %s, want %s", e, e.Subject, want)
		}
	}
}

// checkOneAttemptAtATime fails the test when an event of an attempt
// follows one of a later attempt in the stream: two attempts of the job
// ran at once. Events of attempt 0 (published outside a run) are left out.
// Within an attempt, seq must grow; a gap (an event lost) is returned for
// the test to report.
func checkOneAttemptAtATime(t *testing.T, evs []storedEvent) (gaps []string) {
	t.Helper()
	latest := 0
	lastSeq := map[int]int{}
	for _, e := range evs {
		if e.Attempt == 0 {
			continue
		}
		if e.Attempt < latest {
			t.Errorf("event %s follows an event of attempt %d: two attempts ran at once\n%s", e, latest, eventTrail(evs))
		}
		latest = max(latest, e.Attempt)
		prev := lastSeq[e.Attempt]
		switch {
		case e.Seq <= prev:
			t.Errorf("event %s after seq %d of its attempt", e, prev)
		case e.Seq > prev+1:
			gaps = append(gaps, fmt.Sprintf("attempt %d: seq %d..%d missing before %s", e.Attempt, prev+1, e.Seq-1, e))
		}
		lastSeq[e.Attempt] = max(prev, e.Seq)
	}
	return gaps
}

// eventTrail is the events one a line, for failure messages.
func eventTrail(evs []storedEvent) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString("  " + e.String() + "\n")
	}
	return b.String()
}
