package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestEventTooLargeForTheServerIsDropped: an event the server can never
// take (larger than its max_payload, which shrank after the event was
// measured: a NATS restart with another configuration) was published
// again and again, and every later event of the attempt, its terminal
// event too, waited behind it until the flush gave up (10 s) and was
// lost, with no events.gap. It is now dropped at once, its sequence
// number kept for the attempt's events.gap, and the events after it go.
func TestEventTooLargeForTheServerIsDropped(t *testing.T) {
	t.Parallel()
	s := startSmallServer(t, 16<<10)
	nc := natstest.Connect(t, s)
	ctx := natstest.Context(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	names, _ := NewNames("")
	if _, err := EnsureTopology(ctx, js, TopologyConfig{}, t.Logf); err != nil {
		t.Fatal(err)
	}
	p := &eventPub{js: js, nc: nc, limits: backlogLimits{maxBacklogEvents, maxBacklogBytes}}
	msg := func(seq, size int) *nats.Msg {
		m := nats.NewMsg(names.EventSubject("big-ev", "note"))
		m.Data = []byte(fmt.Sprintf(`{"job_id":"big-ev","type":"note","attempt":1,"seq":%d,"data":"%s"}`, seq, strings.Repeat("x", size)))
		m.Header.Set(nats.MsgIdHdr, fmt.Sprintf("big-ev.1.%d", seq))
		return m
	}
	for _, e := range []struct{ seq, size int }{{1, 10}, {2, 20 << 10}, {3, 10}, {4, 30 << 10}, {5, 10}} {
		if err := p.add(e.seq, msg(e.seq, e.size)); err != nil {
			t.Fatalf("add %d: %v", e.seq, err)
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if n, err := p.flush(fctx, nil); n != 0 || err != nil {
		t.Fatalf("flush: %d events left (%v)", n, err)
	}
	if got := p.takeTooLarge(); !slices.Equal(got, []int{2, 4}) {
		t.Errorf("dropped %v, want [2 4]", got)
	}
	var seqs []string
	for _, m := range streamMsgs(t, nc, names.EventsStream(), "") {
		seqs = append(seqs, m.Header.Get(nats.MsgIdHdr))
	}
	if strings.Join(seqs, " ") != "big-ev.1.1 big-ev.1.3 big-ev.1.5" {
		t.Errorf("stored %v", seqs)
	}
}
