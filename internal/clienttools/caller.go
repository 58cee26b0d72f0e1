package clienttools

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/journal"
	"github.com/jetagent/jetagent/internal/redact"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// Caller is the worker's side: it asks a job's submitter to run client
// tools. It is safe for concurrent use.
type Caller struct {
	nc      *nats.Conn
	jobID   string
	secret  string
	subject string
	o       Options
}

// NewCaller returns a Caller for the job jobID whose submitter holds secret
// (the job's client_secret).
func NewCaller(nc *nats.Conn, jobID, secret string, o Options) (*Caller, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: nil connection", ErrConfig)
	}
	if err := checkJobID(jobID); err != nil {
		return nil, err
	}
	if err := checkSecret(secret); err != nil {
		return nil, err
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Caller{nc: nc, jobID: jobID, secret: secret, subject: Subject(o.Prefix, jobID), o: o}, nil
}

// Subject is where this Caller publishes its requests.
func (c *Caller) Subject() string { return c.subject }

// Retry pacing while nobody listens on the subject (the submitter may be
// reconnecting): the worker keeps asking until its timeout, waiting
// firstRetry, then twice as long each time, at most maxRetry.
const (
	firstRetry = 100 * time.Millisecond
	maxRetry   = 2 * time.Second
)

// republishBackOff paces the requests sent while nobody listens: exact
// doubling (no jitter) from firstRetry to maxRetry, for as long as the call's
// deadline allows rather than an elapsed-time limit of its own.
func republishBackOff() *backoff.ExponentialBackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(firstRetry),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0),
		backoff.WithMaxInterval(maxRetry),
		backoff.WithMaxElapsedTime(0),
	)
}

// Call asks the submitter to run the tool name with args (a JSON object;
// empty means {}) and waits for its answer, at most the configured timeout.
// A tool failure reported by the submitter is a Result with IsError; the
// error is for the transport: ErrNoAnswer on timeout, ErrAnswerTooLarge,
// ErrArgsTooLarge, or ctx's error when ctx ends first. Answers that fail
// authentication are ignored (see Options.OnReject) and the wait goes on.
func (c *Caller) Call(ctx context.Context, name string, args json.RawMessage) (toolcache.Result, error) {
	defer c.maskPanic()
	if !nameRE.MatchString(name) {
		return toolcache.Result{}, fmt.Errorf("client tool %q: invalid name", name)
	}
	args = bytes.TrimSpace(args)
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	// JSON carries text only: Marshal replaces bytes that are not UTF-8
	// after the MAC was made over them, so the submitter refused the
	// request as forged ("bad mac") and the call waited out its timeout.
	// Replaced first, as Serve does for its output.
	if !utf8.Valid(args) {
		args = json.RawMessage(strings.ToValidUTF8(string(args), "\uFFFD"))
	}
	if len(args) > c.o.MaxArgs {
		return toolcache.Result{}, fmt.Errorf("client tool %q: %w (%d bytes > %d)", name, ErrArgsTooLarge, len(args), c.o.MaxArgs)
	}
	if !json.Valid(args) || args[0] != '{' {
		return toolcache.Result{}, fmt.Errorf("client tool %q: arguments are not a JSON object", name)
	}
	idb := make([]byte, 16)
	if _, err := rand.Read(idb); err != nil {
		return toolcache.Result{}, fmt.Errorf("client tool %q: request id: %w", name, err)
	}
	deadline := time.Now().Add(c.o.Timeout)
	req := Request{V: WireVersion, ID: hex.EncodeToString(idb), JobID: c.jobID, Tool: name, Arguments: string(args),
		DeadlineMS: deadline.UnixMilli(), IdempotencyKey: journal.KeyFromContext(ctx)}
	req.Sign(c.secret)
	data, err := json.Marshal(&req)
	if err != nil {
		return toolcache.Result{}, fmt.Errorf("client tool %q: %w", name, err)
	}

	// Our own inbox rather than nc.Request: Request takes the first reply,
	// so anyone who sees the request could answer first; here only an answer
	// with a valid MAC ends the wait.
	inbox := c.nc.NewInbox()
	sub, err := c.nc.SubscribeSync(inbox)
	if err != nil {
		return toolcache.Result{}, fmt.Errorf("client tool %q: subscribe: %w", name, err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // best effort; the inbox is unique
	_ = sub.SetPendingLimits(256, 8*c.o.MaxAnswer+(1<<20))

	waitCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	// Each publish is flushed. The server answers a request nobody is
	// subscribed to with a no-responders status (503) while it handles the
	// publish, before the flush's PONG, so once the flush is back the
	// verdict on that publish is on the inbox. Which reason a timeout
	// gives then does not depend on how fast the 503 came: a republish
	// just before the timeout, its 503 still on the way (a loaded machine,
	// a distant server), left the call "listening", and the timeout said
	// the submitter did not answer when nobody listened. confirmed is
	// false when the flush did not come back (the timeout cut it short).
	publish := func() (confirmed bool, err error) {
		if err := c.nc.PublishMsg(&nats.Msg{Subject: c.subject, Reply: inbox, Data: data}); err != nil {
			return false, fmt.Errorf("client tool %q: publish: %w", name, err)
		}
		return c.nc.FlushWithContext(waitCtx) == nil, nil
	}
	if _, err := publish(); err != nil {
		return toolcache.Result{}, err
	}
	// A NATS restart (or a move to another server of a cluster) while the
	// call waits loses what was on the way: the request, or the answer,
	// which the submitter may publish before this connection has its
	// inbox subscribed again. Nothing came, and the call waited out its
	// timeout saying the submitter did not answer, though the tool ran.
	// Each time the connection is back, the request is sent again (same
	// id): a Serve that answered it already sends that answer again
	// without running the tool again; nobody listening is a 503 as usual.
	reconnected := c.nc.StatusChanged(nats.CONNECTED)
	var resender sync.WaitGroup
	defer resender.Wait()
	defer c.nc.RemoveStatusListener(reconnected) // closes it: the resender returns
	resender.Go(func() {
		for range reconnected {
			_ = c.nc.PublishMsg(&nats.Msg{Subject: c.subject, Reply: inbox, Data: data})
		}
	})
	var (
		pace        = republishBackOff()
		republishAt time.Time // non-zero: ask again then
		listening   = true
		rejected    int   // messages on the inbox that were no answer
		lastReject  error // the last one's reason
	)
	reject := func(err error) {
		rejected++
		lastReject = err
		c.o.OnReject(err)
	}
	for {
		wctx, wcancel := waitCtx, context.CancelFunc(func() {})
		if !republishAt.IsZero() {
			wctx, wcancel = context.WithDeadline(waitCtx, republishAt)
		}
		msg, err := sub.NextMsgWithContext(wctx)
		wcancel()
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			// Nobody subscribed (the submitter may be reconnecting): ask
			// again a little later, until the timeout.
			listening = false
			republishAt = time.Now().Add(pace.NextBackOff())
			continue
		case errors.Is(err, nats.ErrSlowConsumer):
			// Messages to the inbox came faster than they were read (a
			// flood of forged answers) and some were dropped: that ends
			// nothing, as a forged answer ends nothing; the wait goes on.
			reject(fmt.Errorf("%w: messages to the reply subject dropped: %w", ErrRejected, err))
			continue
		case err == nil:
		case ctx.Err() != nil:
			return toolcache.Result{}, fmt.Errorf("client tool %q: %w", name, ctx.Err())
		case waitCtx.Err() != nil:
			if listening && noRespondersQueued(sub) {
				listening = false // the last publish's 503, in before the timeout was seen
			}
			why := "the submitter did not answer"
			if !listening {
				why = "no submitter listening on " + c.subject
			}
			if rejected > 0 {
				why += fmt.Sprintf("; %d message(s) to the reply subject ignored, the last: %v", rejected, lastReject)
			}
			if listening {
				// Someone took the request: a model that reads only "did
				// not answer" calls again, and a write may run twice.
				why += "; it may have run the tool: whether it did is unknown"
			}
			return toolcache.Result{}, fmt.Errorf("client tool %q: %w after %s (%s)", name, ErrNoAnswer, c.o.Timeout, why)
		case !republishAt.IsZero() && errors.Is(err, context.DeadlineExceeded):
			confirmed, err := publish()
			if err != nil {
				return toolcache.Result{}, err
			}
			// Listening until another 503; without a confirmation (the
			// timeout came during the flush) the last verdict stands.
			republishAt, listening = time.Time{}, confirmed
			continue
		default:
			return toolcache.Result{}, fmt.Errorf("client tool %q: %w", name, err)
		}
		var a Answer
		if err := json.Unmarshal(msg.Data, &a); err != nil {
			reject(fmt.Errorf("%w: undecodable answer: %w", ErrRejected, err))
			continue
		}
		if err := a.Verify(c.secret, req.ID); err != nil {
			reject(err)
			continue
		}
		if len(a.Output) > c.o.MaxAnswer {
			return toolcache.Result{}, fmt.Errorf("client tool %q: %w (%d bytes > %d)", name, ErrAnswerTooLarge, len(a.Output), c.o.MaxAnswer)
		}
		return toolcache.Result{Text: a.Output, IsError: a.IsError}, nil
	}
}

// maskPanic is Call's recover (deferred): a panic inside Call (a
// callback such as OnReject, the NATS client) goes on to whoever recovers
// it, with the job's secret masked in its value. The loop makes it the
// call's error and shows the value to the model, the events, the journal
// and the log, masking only its ToolSet's secrets: a value quoting this
// one, the key of every MAC of the job, was shown as it was. Panicking
// again from here keeps the first panic's frames on the stack the loop
// logs.
func (c *Caller) maskPanic() {
	if p := recover(); p != nil {
		panic(redact.Text(fmt.Sprint(p), redact.Forms(c.secret)))
	}
}

// noRespondersQueued reads what is already queued on sub, without
// waiting, and reports whether a no-responders status is among it. A
// timeout seen before a queued message was read (NextMsgWithContext checks
// its context first) would otherwise miss the last publish's verdict.
func noRespondersQueued(sub *nats.Subscription) bool {
	n, _, err := sub.Pending()
	if err != nil {
		return false
	}
	found := false
	for range n {
		_, err := sub.NextMsg(0)
		if errors.Is(err, nats.ErrNoResponders) {
			found = true
		} else if errors.Is(err, nats.ErrTimeout) {
			break
		}
	}
	return found
}

// ToolError is a tool failure the submitter reported (is_error), as an
// error. Tool names the tool when the failure came without text.
type ToolError struct{ Text, Tool string }

func (e *ToolError) Error() string {
	if strings.TrimSpace(e.Text) == "" {
		// The model would read only "Error: ".
		return fmt.Sprintf("client tool %q failed on the submitter's side, which said nothing about why", e.Tool)
	}
	return e.Text
}

// CallText is Call shaped like agentloop.Input.ClientCaller: the output
// text, or an error that is either a transport failure (ErrNoAnswer, ...)
// or a *ToolError carrying the submitter's error text.
func (c *Caller) CallText(ctx context.Context, name string, args json.RawMessage) (string, error) {
	res, err := c.Call(ctx, name, args)
	if err != nil {
		return "", err
	}
	if res.IsError {
		return "", &ToolError{Text: res.Text, Tool: name}
	}
	return res.Text, nil
}
