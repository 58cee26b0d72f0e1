package jobs

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// AsyncErrorEvery is how often one asynchronous NATS error is reported
// again by AsyncErrorHandler.
const AsyncErrorEvery = time.Minute

// AsyncErrorHandler returns a nats.ErrHandler (nats.ErrorHandler) that
// hands report what the server or the client library reports
// asynchronously: permission violations, slow consumers, a KV watcher or
// consumer that stopped getting heartbeats. Without a handler nats.go
// prints each as a bare line on stderr, outside the program's own output,
// and they repeat (a refused publish at every heartbeat, a watcher's
// missed heartbeat every few seconds while the server is away), so one
// message is reported at most once per AsyncErrorEvery, with how often
// it came meanwhile. subject is the subscription's, if any.
func AsyncErrorHandler(report func(err error, subject string, repeated int)) nats.ErrHandler {
	return asyncErrorHandler(report, time.Now)
}

func asyncErrorHandler(report func(err error, subject string, repeated int), clock func() time.Time) nats.ErrHandler {
	var (
		mu     sync.Mutex
		last   = map[string]time.Time{}
		repeat = map[string]int{}
	)
	return func(_ *nats.Conn, sub *nats.Subscription, err error) {
		if err == nil {
			return
		}
		msg := err.Error()
		now := clock()
		mu.Lock()
		if t, ok := last[msg]; ok && now.Sub(t) < AsyncErrorEvery {
			repeat[msg]++
			mu.Unlock()
			return
		}
		if len(last) >= 64 { // messages name subjects: keep the memory bounded
			clear(last)
			clear(repeat)
		}
		n := repeat[msg]
		delete(repeat, msg)
		last[msg] = now
		mu.Unlock()
		subject := ""
		if sub != nil {
			subject = sub.Subject
		}
		report(err, subject, n)
	}
}
