package clienttools

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/journal"
	"github.com/jetagent/jetagent/internal/redact"
)

// Handler runs one client tool for the submitter. A tool failure is
// (message, true, nil); a non-nil error is also answered as a tool error
// carrying its text, so the worker never waits in vain. ctx carries the
// call's idempotency key (journal.KeyFromContext), to run a call once.
type Handler func(ctx context.Context, name string, args json.RawMessage) (output string, isError bool, err error)

// clockSkew is how far past its deadline a request is still accepted, so
// that worker and submitter clocks need not agree closely; request ids are
// remembered that long to refuse replays.
const clockSkew = 2 * time.Minute

// Serve answers the client tool requests of job jobID with h until stop is
// called; stop must be called. When ctx ends, running handlers are
// cancelled and new requests ignored. Only requests carrying a valid MAC under secret are
// run; others are ignored (Options.OnReject). Handlers run concurrently (at
// most Options.MaxActive), each until the request's deadline (when the
// worker stops waiting) or Options.Timeout, whichever is later. stop waits for
// running handlers, cancelling them first.
func Serve(ctx context.Context, nc *nats.Conn, jobID, secret string, h Handler, o Options) (stop func(), err error) {
	if nc == nil || h == nil {
		return nil, fmt.Errorf("%w: nil connection or handler", ErrConfig)
	}
	if err := checkJobID(jobID); err != nil {
		return nil, err
	}
	if err := checkSecret(secret); err != nil {
		return nil, err
	}
	if o, err = o.withDefaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &responder{nc: nc, jobID: jobID, secret: secret, h: h, o: o, ctx: ctx, sem: make(chan struct{}, o.MaxActive), seen: map[string]time.Time{}, answers: map[string]kept{}}
	// Not in a queue group: the submitter a Serve replaces (submit watch
	// --local-mcp) may hold a connection the server has not yet found
	// dead, which would take its share of the requests and lose them.
	sub, err := nc.Subscribe(Subject(o.Prefix, jobID), s.receive)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("clienttools: subscribe: %w", err)
	}
	// The subscription must be known to the server before the job is
	// submitted, or the first request finds no responder.
	if err := nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		cancel()
		return nil, fmt.Errorf("clienttools: flush: %w", err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = sub.Unsubscribe()
			cancel()
			// A callback may still be running after Unsubscribe; closed
			// keeps it from adding to wg while we wait.
			s.mu.Lock()
			s.closed = true
			s.mu.Unlock()
			s.wg.Wait()
		})
	}
	return stop, nil
}

type responder struct {
	nc     *nats.Conn
	jobID  string
	secret string
	h      Handler
	o      Options
	ctx    context.Context
	sem    chan struct{}
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	seen   map[string]time.Time // request id -> forget after
	// answers are the answers published, by request id, until their id is
	// forgotten (at most maxKeptAnswers bytes): a request sent again (the
	// worker reconnected after a NATS restart, which may have lost the
	// answer) is answered again from here, never run twice.
	answers   map[string]kept
	keptBytes int // in answers
}

// kept is an answer published and where it went.
type kept struct {
	reply string
	data  []byte
}

// maxKeptAnswers bounds the answers a Serve keeps to send again; beyond
// it an answer is not kept, and its request sent again is only refused.
const maxKeptAnswers = 32 << 20

// receive runs on the subscription's goroutine: it authenticates, then
// hands the request to a goroutine, blocking while MaxActive are running.
func (s *responder) receive(msg *nats.Msg) {
	if s.ctx.Err() != nil {
		return
	}
	var req Request
	if err := json.Unmarshal(msg.Data, &req); err != nil {
		s.o.OnReject(fmt.Errorf("%w: undecodable request: %w", ErrRejected, err))
		return
	}
	if err := req.Verify(s.secret); err != nil {
		s.o.OnReject(err)
		return
	}
	switch {
	case req.JobID != s.jobID:
		s.o.OnReject(fmt.Errorf("%w: request for job %q", ErrRejected, req.JobID))
		return
	case msg.Reply == "":
		s.o.OnReject(fmt.Errorf("%w: request without reply subject", ErrRejected))
		return
	case !s.fresh(req):
		if a, ok := s.answered(req.ID); ok {
			// To where the first answer went, the worker's inbox (the
			// same in every send of a request): whoever replays a request
			// it saw gets nothing it could not see before.
			_ = s.nc.Publish(a.reply, a.data)
			s.o.OnReject(fmt.Errorf("%w: replayed request %s, not run again: its answer was sent again", ErrRejected, req.ID))
			return
		}
		s.o.OnReject(fmt.Errorf("%w: stale or replayed request %s", ErrRejected, req.ID))
		return
	}
	select {
	case s.sem <- struct{}{}:
	case <-s.ctx.Done():
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.sem
		return
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() { <-s.sem }()
		s.answer(msg.Reply, req)
	}()
}

// fresh records req.ID and tells whether it is neither stale nor a replay.
func (s *responder) fresh(req Request) bool {
	now := time.Now()
	forget := time.UnixMilli(req.DeadlineMS).Add(clockSkew)
	if now.After(forget) {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.seen[req.ID]; dup {
		return false
	}
	for id, t := range s.seen {
		if now.After(t) {
			delete(s.seen, id)
			s.keptBytes -= len(s.answers[id].data)
			delete(s.answers, id)
		}
	}
	s.seen[req.ID] = forget
	return true
}

// answered is the answer published to request id, if it is kept.
func (s *responder) answered(id string) (kept, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.answers[id]
	return a, ok
}

// keep records the answer to request id, within maxKeptAnswers.
func (s *responder) keep(id, reply string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[id]; !ok || s.keptBytes+len(data) > maxKeptAnswers {
		return
	}
	s.answers[id] = kept{reply: reply, data: data}
	s.keptBytes += len(data)
}

// maxPanicValue bounds the panic value a handler's answer quotes.
const maxPanicValue = 500

// handle is the handler with a panic turned into the call's tool error
// (and told to Options.OnPanic): in the request's goroutine a panic ended
// the submitter's process, the job's other calls with it, and the worker
// waited out its timeout.
func (s *responder) handle(ctx context.Context, name string, args json.RawMessage) (out string, isErr bool, err error) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		// The answer goes to the worker's model and events: the job's
		// secret (the handler's closure may hold it) is masked first,
		// before the cut, which could leave its head.
		v := redact.Text(fmt.Sprint(p), redact.Forms(s.secret))
		if len(v) > maxPanicValue {
			v = strings.ToValidUTF8(v[:maxPanicValue], "") + fmt.Sprintf("... (%d bytes)", len(v))
		}
		out, isErr, err = "", true, fmt.Errorf("the client tool %s failed inside the submitter: %s", name, v)
		s.o.OnPanic(err, debug.Stack())
	}()
	return s.h(ctx, name, args)
}

func (s *responder) answer(reply string, req Request) {
	a := Answer{V: WireVersion, ID: req.ID}
	if len(req.Arguments) > s.o.MaxArgs {
		a.Output, a.IsError = fmt.Sprintf("arguments too large (%d bytes > %d)", len(req.Arguments), s.o.MaxArgs), true
	} else {
		// The worker waits until the request's deadline (its
		// JETAGENT_CLIENT_TOOL_TIMEOUT), which may be longer than
		// Options.Timeout; the handler gets whichever is later, so clock
		// skew cannot cut it short either.
		until := time.Now().Add(s.o.Timeout)
		if d := time.UnixMilli(req.DeadlineMS); d.After(until) {
			until = d
		}
		// The call's idempotency key, for the handler (and, through
		// LocalMCPHandler, the local server's _meta) to run it once:
		// dropped here, no submitter's tool ever saw it.
		ctx, cancel := context.WithDeadline(journal.ContextWithKey(s.ctx, req.IdempotencyKey), until)
		out, isErr, err := s.handle(ctx, req.Tool, json.RawMessage(req.Arguments))
		cancel()
		a.Output, a.IsError = out, isErr
		if err != nil {
			a.Output, a.IsError = err.Error(), true
		}
		if a.IsError && s.ctx.Err() != nil {
			// Cut short by the submitter's stop (submit's Ctrl-C): the
			// handler's "context canceled" told the model nothing.
			a.Output = "the submitter stopped before the tool answered (it may have run): " + a.Output
		}
	}
	// JSON carries text only: Marshal would replace bytes that are not
	// UTF-8 after the MAC was made over them, and the worker would reject
	// the answer and wait out its timeout. Replace them before signing.
	a.Output = strings.ToValidUTF8(a.Output, "\uFFFD")
	if len(a.Output) > s.o.MaxAnswer {
		a.Output, a.IsError = fmt.Sprintf("answer too large (%d bytes > %d)", len(a.Output), s.o.MaxAnswer), true
	}
	a.Sign(s.secret)
	data, err := json.Marshal(&a)
	if err == nil && int64(len(data)) > s.nc.MaxPayload() {
		a = Answer{V: WireVersion, ID: req.ID, IsError: true, Output: fmt.Sprintf("answer too large for NATS (%d bytes > %d)", len(data), s.nc.MaxPayload())}
		a.Sign(s.secret)
		data, err = json.Marshal(&a)
	}
	if err != nil {
		return // Marshal of strings cannot fail; the worker times out.
	}
	s.keep(req.ID, reply, data)
	_ = s.nc.Publish(reply, data) // a lost answer is asked for again once the worker reconnects
}
