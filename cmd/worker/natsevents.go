package main

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/redact"
)

// natsCloseWait bounds closeNATS's wait for the closed handler.
const natsCloseWait = 5 * time.Second

// logNATSEvents logs nc's disconnects, reconnects and final close, once
// each: during an outage the worker said only "heartbeat failed: nats:
// connection closed", which read as permanent. nats.go calls the
// disconnect handler once per outage (not per reconnect attempt, whose
// handler is left unset) and the reconnect handler once it is back. The
// disconnect that Close itself reports (with no error) is not logged.
//
// The returned func closes nc and waits (at most natsCloseWait) for the
// close to be logged: the handlers run on nats.go's own goroutine, which
// would otherwise write after serve returned.
func logNATSEvents(nc *nats.Conn, log *slog.Logger) (closeNATS func()) {
	var (
		closing atomic.Bool  // we called Close
		downAt  atomic.Int64 // unix nanoseconds of the last disconnect, 0 when up
		closed  = make(chan struct{})
		server  atomic.Value // string: the URL last connected to (ConnectedUrl is "" once down)
	)
	server.Store(redact.URL(nc.ConnectedUrl()))
	nc.SetDisconnectErrHandler(func(nc *nats.Conn, err error) {
		if closing.Load() && err == nil {
			return // our own Close; the closed handler says so
		}
		downAt.Store(time.Now().UnixNano())
		log.Warn("NATS connection lost; reconnecting",
			"url", server.Load(), "err", err)
	})
	nc.SetReconnectHandler(func(nc *nats.Conn) {
		url := redact.URL(nc.ConnectedUrl())
		server.Store(url)
		attrs := []any{"url", url}
		if t := downAt.Swap(0); t != 0 {
			attrs = append(attrs, "down_for", time.Since(time.Unix(0, t)).Round(time.Millisecond))
		}
		log.Info("NATS connection restored", attrs...)
	})
	nc.SetErrorHandler(asyncErrorLogger(log))
	nc.SetClosedHandler(func(nc *nats.Conn) {
		defer close(closed)
		if closing.Load() {
			log.Info("NATS connection closed")
			return
		}
		// Not by the worker: nats.go gave up (MaxReconnects is unlimited,
		// so a server that refuses the worker for good).
		log.Error("NATS connection closed for good; the worker takes no more jobs", "err", nc.LastError())
	})
	return func() {
		closing.Store(true)
		nc.Close()
		select {
		case <-closed:
		case <-time.After(natsCloseWait):
		}
	}
}

// asyncErrEvery is how often one asynchronous NATS error is logged again.
const asyncErrEvery = time.Minute

// asyncErrorLogger logs what the server reports asynchronously
// (permission violations, slow consumers) in the worker's log: without a
// handler nats.go prints bare "nats: permissions violation ..." lines on
// stderr, outside the structured log. A server repeats a refusal at every
// publish it refuses (each heartbeat), so one message is logged at most
// once a minute, with how often it came meanwhile.
func asyncErrorLogger(log *slog.Logger) nats.ErrHandler {
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
		now := time.Now()
		mu.Lock()
		if t, ok := last[msg]; ok && now.Sub(t) < asyncErrEvery {
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
		attrs := []any{"err", err}
		if sub != nil {
			attrs = append(attrs, "subject", sub.Subject)
		}
		if n > 0 {
			attrs = append(attrs, "repeated", n)
		}
		log.Warn("NATS server reported an error", attrs...)
	}
}
