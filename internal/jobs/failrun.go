package jobs

import (
	"log/slog"
	"slices"
	"time"
)

// failRunEvery is how often a run of failures of one operation is
// summarized while it goes on.
const failRunEvery = time.Minute

// failRun logs a run of failures of one repeated operation (a fetch, tried
// every second while NATS or the consumer's leader is away) in a few
// lines instead of one a try: "<op> failed" at Warn for the first, "<op>
// still failing" at Warn every failRunEvery or when the error says
// something else, each other failure at Debug, and "<op> works again" at
// Info once it does. For one goroutine.
type failRun struct {
	log   *slog.Logger
	op    string // as "fetch"
	attrs []any  // added to every line, as "queue", name
	now   func() time.Time

	since, logged time.Time // the run's start; its last Warn line
	n             int       // failures in the run; 0: none
	text          string    // the error of the last Warn line
}

func newFailRun(log *slog.Logger, op string, attrs ...any) *failRun {
	return &failRun{log: log, op: op, attrs: attrs, now: time.Now}
}

// fail notes a failure.
func (f *failRun) fail(err error) {
	now := f.now()
	f.n++
	switch {
	case f.n == 1:
		f.since, f.logged, f.text = now, now, err.Error()
		f.log.Warn(f.op+" failed", slices.Concat(f.attrs, []any{"err", err})...)
	case err.Error() != f.text || now.Sub(f.logged) >= failRunEvery:
		f.logged, f.text = now, err.Error()
		f.log.Warn(f.op+" still failing", slices.Concat(f.attrs, []any{"failures", f.n, "for", now.Sub(f.since).Round(time.Second), "err", err})...)
	default:
		f.log.Debug(f.op+" failed", slices.Concat(f.attrs, []any{"failures", f.n, "err", err})...)
	}
}

// ok notes a success, ending a run of failures.
func (f *failRun) ok() {
	if f.n == 0 {
		return
	}
	f.log.Info(f.op+" works again", slices.Concat(f.attrs, []any{"failures", f.n, "for", f.now().Sub(f.since).Round(time.Second)})...)
	f.n = 0
}
