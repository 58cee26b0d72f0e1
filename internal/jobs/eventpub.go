package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Events are published asynchronously, their acks awaited in batches.
//
// An attempt's events go out with PublishMsgAsync as they are emitted, in
// emission order on the worker's one connection, each with its Nats-Msg-Id
// <job_id>.<attempt>.<seq>; the attempt waits for their acks only when it
// must (flush): once its runner returns, before its outcome is stored (so
// what a client reads in the state follows events that are stored), and
// after its terminal event, together with the message's ack. An event whose
// publish fails or whose ack does not come within resendAfter (NATS away,
// an ack lost) is published again, with the same id, from that event on,
// in order, until it is acknowledged: the stream's duplicate window drops
// the copies the server had already stored. While NATS is away, events wait
// in the attempt's backlog (nats.go's reconnect buffer first, then this
// one's). The backlog is bounded (maxBacklogEvents, maxBacklogBytes): an
// event that does not fit is refused (Emit's error, and a warning in the
// log), and once there is room again an events.gap event says which
// sequence numbers were lost. A lost sequence number is never reused, so a
// reader also sees the gap in seq.
//
// Order: the server stores one connection's publishes in the order it
// reads them, so events are stored in emission order. Only when a
// connection breaks with publishes in flight can a re-sent event land
// after later ones that went through the reconnect buffer; seq still
// gives the emission order.

// EventGap is the type of the event that reports events an attempt lost
// (data: first_seq, last_seq, lost).
const EventGap = "events.gap"

// Backlog bounds of one attempt's unacknowledged events.
const (
	maxBacklogEvents = 1024
	maxBacklogBytes  = 8 << 20
	// resendAfter is how long an event's ack may take before flush
	// publishes it again (its first publish may still be acknowledged:
	// the copy is then dropped as a duplicate).
	resendAfter = 2 * time.Second
	// flushTimeout bounds a flush of an attempt's events.
	flushTimeout = publishTimeout
)

// errBacklogFull refuses an event while the attempt's backlog is full.
var errBacklogFull = errors.New("event backlog full (NATS unreachable): event dropped")

// eventPub is one attempt's published, not yet acknowledged events.
type eventPub struct {
	js     jetstream.JetStream
	nc     *nats.Conn
	limits backlogLimits

	mu    sync.Mutex
	q     []*outEvent // in emission order
	bytes int
	// tooLarge are the sequence numbers of events the server refused for
	// good (larger than its max_payload: it shrank after they were
	// measured, a NATS restart with another configuration), dropped for
	// the attempt's events.gap. Retried, each held every later event of the
	// attempt, its terminal event too, until the flush gave up.
	tooLarge []int
	// refused are those the events stream refused for good (larger than
	// its max_msg_size, an operator's setting): retried, each held every
	// later event of the attempt, its terminal event too, and the flush
	// gave up after its bound ("context deadline exceeded"), those events
	// lost. refusedWhy is the server's word.
	refused    []int
	refusedWhy string
}

// outEvent is one event message on its way.
type outEvent struct {
	seq  int
	msg  *nats.Msg
	fut  jetstream.PubAckFuture // nil: to be (re)published
	sent time.Time
}

// room reports whether an event of n bytes fits the backlog now.
func (p *eventPub) room(n int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reapLocked()
	return p.fitsLocked(n)
}

func (p *eventPub) fitsLocked(n int) bool {
	return len(p.q) < p.limits.events && p.bytes+n <= p.limits.bytes
}

// backlogLimits bound an attempt's backlog.
type backlogLimits struct{ events, bytes int }

// eventBacklog is the worker's backlog bounds (w.backlog in tests).
func (w *Worker) eventBacklog() backlogLimits {
	if w.backlog.events > 0 {
		return w.backlog
	}
	return backlogLimits{maxBacklogEvents, maxBacklogBytes}
}

// add queues m and publishes what the backlog holds, in order. It refuses
// m (errBacklogFull) when the backlog has no room for it.
func (p *eventPub) add(seq int, m *nats.Msg) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reapLocked()
	n := len(m.Data)
	if !p.fitsLocked(n) {
		return errBacklogFull
	}
	p.q = append(p.q, &outEvent{seq: seq, msg: m})
	p.bytes += n
	p.pumpLocked()
	return nil
}

// reapLocked drops the acknowledged events at the head of the backlog; an
// event whose publish failed is published again, with every one after it.
func (p *eventPub) reapLocked() {
	for len(p.q) > 0 {
		ev := p.q[0]
		if ev.fut == nil {
			break
		}
		select {
		case <-ev.fut.Ok():
			p.pop()
			continue
		case err := <-ev.fut.Err():
			if p.dropRefusedLocked(err) {
				continue
			}
			p.unsendFrom(0) // sent again
		default:
		}
		break
	}
	p.pumpLocked()
}

// dropRefusedLocked drops the head of the backlog when err, its publish's
// answer, refuses it for good (the stream's max_msg_size), keeping its
// sequence number for the events.gap event; it reports whether it did.
func (p *eventPub) dropRefusedLocked(err error) bool {
	var api *jetstream.APIError
	if !errors.As(err, &api) || api.ErrorCode != jetstream.JSErrCodeStreamMessageExceedsMaximum || len(p.q) == 0 {
		return false
	}
	p.refused = append(p.refused, p.q[0].seq)
	p.refusedWhy = api.Description
	p.pop()
	return true
}

func (p *eventPub) pop() {
	p.bytes -= len(p.q[0].msg.Data)
	p.q[0] = nil
	p.q = p.q[1:]
}

// unsendFrom marks the events from index i on as to be published again.
func (p *eventPub) unsendFrom(i int) {
	for _, ev := range p.q[i:] {
		ev.fut = nil
	}
}

// pumpLocked publishes the events not in flight, in order, stopping at
// the first that cannot be published now (they wait in the backlog).
func (p *eventPub) pumpLocked() {
	for i := 0; i < len(p.q); i++ {
		ev := p.q[i]
		if ev.fut != nil {
			continue
		}
		// A copy of the message: nats.go keeps the one it publishes.
		m := &nats.Msg{Subject: ev.msg.Subject, Data: ev.msg.Data, Header: ev.msg.Header}
		fut, err := p.js.PublishMsgAsync(m, jetstream.WithStallWait(time.Millisecond))
		if errors.Is(err, nats.ErrMaxPayload) { // never publishable: dropped, not waited for
			p.tooLarge = append(p.tooLarge, ev.seq)
			p.bytes -= len(ev.msg.Data)
			p.q = slices.Delete(p.q, i, i+1)
			i--
			continue
		}
		if err != nil {
			p.unsendFrom(i)
			return
		}
		ev.fut, ev.sent = fut, time.Now()
	}
}

// takeTooLarge returns the sequence numbers of the events dropped as too
// large since the last call.
func (p *eventPub) takeTooLarge() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	seqs := p.tooLarge
	p.tooLarge = nil
	return seqs
}

// takeRefused returns the sequence numbers of the events the stream
// refused since the last call, with the server's reason.
func (p *eventPub) takeRefused() ([]int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seqs, why := p.refused, p.refusedWhy
	p.refused = nil
	return seqs, why
}

// hasTooLarge reports whether events were dropped as too large and not
// yet taken.
func (p *eventPub) hasTooLarge() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.tooLarge) > 0 || len(p.refused) > 0
}

// pending is the number of events not yet acknowledged.
func (p *eventPub) pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reapLocked()
	return len(p.q)
}

// flush waits until every event of the backlog is acknowledged,
// publishing again those whose publish failed or whose ack is late, until
// ctx ends or stop reports true (the attempt was fenced). It returns how
// many events were left unacknowledged, with the reason.
func (p *eventPub) flush(ctx context.Context, stop func() bool) (int, error) {
	retry := time.NewTimer(resendAfter)
	defer retry.Stop()
	for {
		p.mu.Lock()
		p.reapLocked()
		if len(p.q) == 0 {
			p.mu.Unlock()
			return 0, nil
		}
		head := p.q[0]
		if head.fut == nil {
			p.mu.Unlock()
			// Not publishable now (NATS away): try again shortly.
			select {
			case <-ctx.Done():
				return p.pending(), ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		fut := head.fut
		late := time.Until(head.sent.Add(resendAfter))
		p.mu.Unlock()
		if stop != nil && stop() {
			return p.pending(), errFenced
		}
		if late <= 0 && p.nc.IsConnected() {
			p.resend(head)
			continue
		}
		late = max(late, 50*time.Millisecond) // away: its reconnect buffer holds it
		retry.Reset(late)
		select {
		case <-fut.Ok():
			p.mu.Lock()
			if len(p.q) > 0 && p.q[0] == head {
				p.pop()
			}
			p.mu.Unlock()
		case err := <-fut.Err():
			p.mu.Lock()
			dropped := len(p.q) > 0 && p.q[0] == head && p.dropRefusedLocked(err)
			p.mu.Unlock()
			if !dropped {
				p.resend(head)
			}
		case <-retry.C:
			if p.nc.IsConnected() {
				p.resend(head)
			}
		case <-ctx.Done():
			return p.pending(), ctx.Err()
		}
	}
}

// resend publishes head and every event after it again.
func (p *eventPub) resend(head *outEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.q) > 0 && p.q[0] == head {
		p.unsendFrom(0)
		p.pumpLocked()
	}
}

// flushEvents waits for the attempt's events to be acknowledged (see
// eventPub.flush) and logs the ones that were not.
func (w *Worker) flushEvents(ctx context.Context, d delivery) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	if n, err := d.env.flush(ctx); err != nil {
		d.log.Error("events not acknowledged", "events", n, "err", err)
		w.checkAssets() // the events stream may be gone
	}
}

// gapData is an events.gap event's data.
func gapData(first, last, lost int) map[string]any {
	return map[string]any{"first_seq": first, "last_seq": last, "lost": lost, "reason": fmt.Sprint(errBacklogFull)}
}
