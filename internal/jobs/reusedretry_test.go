package jobs

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestRetryAfterARestartIsNotCalledAReuse: a publisher's retry of a
// finished job's message (same Nats-Msg-Id, same task) is stored again once
// the nats-server restarted (seen in the soak: the server rebuilds the
// duplicate window from the messages it holds, and the finished job's was
// acknowledged away). The copy is refused, as before, but its reason said
// "submit the job again under another id", which would run the job twice;
// it now says the copy is most likely a retry. A copy with another task
// keeps the old advice.
func TestRetryAfterARestartIsNotCalledAReuse(t *testing.T) {
	t.Parallel()
	r := startRestartable(t)
	r.mu.Lock()
	s := r.s
	r.mu.Unlock()
	nc := natstest.Connect(t, s, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	startWorker(t, nc, Config{Runner: newTestRunner(), UnservedCheck: -1})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	const id = "retried"
	body := []byte(`{"id":"` + id + `","task":"echo:hi"}`)
	first, err := c.topo.JS.PublishMsg(ctx, &nats.Msg{Subject: c.names.JobsSubject(DefaultQueue), Data: body,
		Header: nats.Header{nats.MsgIdHdr: []string{id}}})
	if err != nil {
		t.Fatal(err)
	}
	if st := waitStatus(t, c, id); st.Status != StatusSucceeded {
		t.Fatalf("state %+v; want succeeded", st)
	}
	waitEmpty(t, nc, c)
	for _, tt := range []struct {
		name, body, want string
	}{
		{"retry", string(body), "most likely a publisher's retry"},
		{"other task", `{"id":"` + id + `","task":"echo:other"}`, "submit the job again under another id"},
	} {
		r.stop() // the restarted server forgets the ids of messages it no longer holds
		r.start()
		ack, err := c.topo.JS.PublishMsg(ctx, &nats.Msg{Subject: c.names.JobsSubject(DefaultQueue), Data: []byte(tt.body),
			Header: nats.Header{nats.MsgIdHdr: []string{id}}})
		if err != nil {
			t.Fatal(err)
		}
		if ack.Duplicate {
			t.Fatalf("%s: the restarted server dropped the copy as a duplicate: nothing to test", tt.name)
		}
		reason := deadLetterOf(ctx, t, c.topo.JS, c.names.DLQStream(), ack.Sequence).Headers().Get("Jetagent-Reason")
		if !strings.Contains(reason, fmt.Sprintf("job id reused: job id %s already ended (succeeded, stream sequence %d)", id, first.Sequence)) ||
			!strings.Contains(reason, tt.want) {
			t.Errorf("%s: reason %q; want the reuse named, and %q", tt.name, reason, tt.want)
		}
	}
	var types []string
	for _, ev := range watchEvents(t, c, id) {
		types = append(types, ev.Type)
	}
	if got := strings.Join(types, ","); got != "started,note,succeeded" {
		t.Errorf("events %s; want the first job's only: started,note,succeeded", got)
	}
}
