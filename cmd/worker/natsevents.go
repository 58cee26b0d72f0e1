package main

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/jobs"
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

// asyncErrorLogger logs what the server reports asynchronously
// (permission violations, slow consumers) in the worker's log, instead of
// nats.go's bare lines on stderr (jobs.AsyncErrorHandler).
func asyncErrorLogger(log *slog.Logger) nats.ErrHandler {
	return jobs.AsyncErrorHandler(func(err error, subject string, repeated int) {
		attrs := []any{"err", err}
		if subject != "" {
			attrs = append(attrs, "subject", subject)
		}
		if repeated > 0 {
			attrs = append(attrs, "repeated", repeated)
		}
		log.Warn("NATS server reported an error", attrs...)
	})
}
