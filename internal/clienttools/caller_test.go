package clienttools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/natstest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
	h := func(_ context.Context, name string, args json.RawMessage) (string, bool, error) {
		switch name {
		case "fail":
			return "it broke", true, nil
		case "err":
			return "", false, errors.New("handler failed")
		}
		return echo(context.Background(), name, args)
	}
	serve(t, submitter, "job-rt", testSecret, h, Options{})
	c := newCaller(t, worker, "job-rt", testSecret, Options{Timeout: 10 * time.Second})
	tests := []struct {
		name, tool, args, want string
		isErr                  bool
	}{
		{"echo", "echo", `{"a":1}`, `echo {"a":1}`, false},
		{"empty args are {}", "echo", ``, `echo {}`, false},
		{"unicode", "echo", `{"s":"héllo ✓\n"}`, `echo {"s":"héllo ✓\n"}`, false},
		{"tool error", "fail", `{}`, "it broke", true},
		{"handler error", "err", `{}`, "handler failed", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := c.Call(natstest.Context(t), tt.tool, json.RawMessage(tt.args))
			if err != nil {
				t.Fatal(err)
			}
			if res.Text != tt.want || res.IsError != tt.isErr {
				t.Errorf("got %q (isError %v), want %q (isError %v)", res.Text, res.IsError, tt.want, tt.isErr)
			}
		})
	}
}

func TestCallText(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
	serve(t, submitter, "job-text", testSecret, func(_ context.Context, name string, _ json.RawMessage) (string, bool, error) {
		return "result of " + name, name == "bad", nil
	}, Options{})
	c := newCaller(t, worker, "job-text", testSecret, Options{Timeout: 10 * time.Second})
	if out, err := c.CallText(natstest.Context(t), "good", nil); err != nil || out != "result of good" {
		t.Errorf("good: %q, %v", out, err)
	}
	var te *ToolError
	if _, err := c.CallText(natstest.Context(t), "bad", nil); !errors.As(err, &te) || te.Text != "result of bad" {
		t.Errorf("bad: got %v, want *ToolError", err)
	}
}

// A failure the submitter reported without a word still says it failed:
// the model was shown "Error: " and nothing after it.
func TestSilentToolErrorNamed(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
	serve(t, submitter, "job-silent", testSecret, func(context.Context, string, json.RawMessage) (string, bool, error) {
		return " \n", true, nil
	}, Options{})
	c := newCaller(t, worker, "job-silent", testSecret, Options{Timeout: 10 * time.Second})
	_, err := c.CallText(natstest.Context(t), "ask_user", nil)
	var te *ToolError
	if !errors.As(err, &te) || err.Error() != `client tool "ask_user" failed on the submitter's side, which said nothing about why` {
		t.Errorf("got %v", err)
	}
}

func TestTimeoutIsClearError(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
	started := make(chan struct{}, 1)
	serve(t, submitter, "job-slow", testSecret, blockUntilCancelled(started), Options{})
	c := newCaller(t, worker, "job-slow", testSecret, Options{Timeout: 300 * time.Millisecond})
	_, err := c.Call(natstest.Context(t), "slow", nil)
	if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("got %v, want ErrNoAnswer (did not answer)", err)
	}
	recv(t, started)
}

func TestNoSubmitter(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	c := newCaller(t, natstest.Connect(t, s), "job-alone", testSecret, Options{Timeout: 400 * time.Millisecond})
	_, err := c.Call(natstest.Context(t), "echo", nil)
	if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "no submitter listening on agent.client.job-alone") {
		t.Fatalf("got %v, want ErrNoAnswer naming the missing listener", err)
	}
}

// The republish pace doc.go promises: 100 ms doubling to 2 s, then 2 s for
// as long as the call lasts.
func TestRepublishBackOff(t *testing.T) {
	t.Parallel()
	b := republishBackOff()
	ms := time.Millisecond
	want := []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2000 * ms, 2000 * ms, 2000 * ms}
	for i, w := range want {
		if got := b.NextBackOff(); got != w {
			t.Errorf("wait %d = %v, want %v", i+1, got, w)
		}
	}
}

// A submitter that subscribes after the first request (found no responder)
// still gets asked again before the timeout.
func TestLateSubmitter(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
	c := newCaller(t, worker, "job-late", testSecret, Options{Timeout: 20 * time.Second})
	done := make(chan error, 1)
	go func() {
		res, err := c.Call(natstest.Context(t), "echo", json.RawMessage(`{"late":true}`))
		if err == nil && res.Text != `echo {"late":true}` {
			err = fmt.Errorf("got %q", res.Text)
		}
		done <- err
	}()
	serve(t, submitter, "job-late", testSecret, echo, Options{})
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
}

func TestWrongSecretIgnored(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
	rejected := make(chan error, 4)
	var ran atomic.Int32
	serve(t, submitter, "job-sec", strings.Repeat("x", 32), func(ctx context.Context, n string, a json.RawMessage) (string, bool, error) {
		ran.Add(1)
		return echo(ctx, n, a)
	}, Options{OnReject: func(err error) { rejected <- err }})
	c := newCaller(t, worker, "job-sec", testSecret, Options{Timeout: 500 * time.Millisecond})
	_, err := c.Call(natstest.Context(t), "echo", nil)
	if !errors.Is(err, ErrNoAnswer) {
		t.Fatalf("got %v, want ErrNoAnswer", err)
	}
	if rej := recv(t, rejected); !errors.Is(rej, ErrRejected) || !strings.Contains(rej.Error(), "bad mac") {
		t.Errorf("rejection %v, want bad mac", rej)
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("handler ran %d times for an unauthenticated request", n)
	}
}

// Anyone who sees a request can reply to its inbox: a forged answer is
// ignored and the real one, arriving later, is taken.
func TestForgedAnswerIgnored(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, submitter, rogue := natstest.Connect(t, s), natstest.Connect(t, s), natstest.Connect(t, s)
	forgedSeen := make(chan struct{})
	var once sync.Once
	c := newCaller(t, worker, "job-forge", testSecret, Options{
		Timeout:  10 * time.Second,
		OnReject: func(error) { once.Do(func() { close(forgedSeen) }) },
	})
	sub, err := rogue.Subscribe(Subject("agent", "job-forge"), func(m *nats.Msg) {
		var req Request
		_ = json.Unmarshal(m.Data, &req)
		a := Answer{V: WireVersion, ID: req.ID, Output: "forged"}
		a.Sign(strings.Repeat("y", 32))
		b, _ := json.Marshal(a)
		_ = m.Respond(b)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := rogue.Flush(); err != nil { // the rogue must hear the request
		t.Fatal(err)
	}
	serve(t, submitter, "job-forge", testSecret, func(ctx context.Context, _ string, _ json.RawMessage) (string, bool, error) {
		select { // answer only once the forged answer was rejected
		case <-forgedSeen:
			return "genuine", false, nil
		case <-ctx.Done():
			return "", true, ctx.Err()
		}
	}, Options{})
	res, err := c.Call(natstest.Context(t), "echo", nil)
	if err != nil || res.Text != "genuine" {
		t.Fatalf("got %q, %v; want genuine", res.Text, err)
	}
}

func TestReplayedRequestRejected(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, submitter, spy := natstest.Connect(t, s), natstest.Connect(t, s), natstest.Connect(t, s)
	captured := make(chan *nats.Msg, 1)
	sub, err := spy.Subscribe(Subject("agent", "job-replay"), func(m *nats.Msg) { captured <- m })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	rejected := make(chan error, 1)
	var ran atomic.Int32
	serve(t, submitter, "job-replay", testSecret, func(ctx context.Context, n string, a json.RawMessage) (string, bool, error) {
		ran.Add(1)
		return echo(ctx, n, a)
	}, Options{OnReject: func(err error) { rejected <- err }})
	c := newCaller(t, worker, "job-replay", testSecret, Options{Timeout: 10 * time.Second})
	if _, err := c.Call(natstest.Context(t), "echo", nil); err != nil {
		t.Fatal(err)
	}
	m := recv(t, captured)
	if err := spy.PublishMsg(&nats.Msg{Subject: m.Subject, Reply: spy.NewInbox(), Data: m.Data}); err != nil {
		t.Fatal(err)
	}
	if rej := recv(t, rejected); !strings.Contains(rej.Error(), "replayed") {
		t.Errorf("rejection %v, want replayed", rej)
	}
	if n := ran.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestSizeLimits(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
	big := func(n int) Handler {
		return func(context.Context, string, json.RawMessage) (string, bool, error) {
			return strings.Repeat("z", n), false, nil
		}
	}
	// Submitter allows big answers, the worker does not: rejected by the worker.
	serve(t, submitter, "job-big", testSecret, big(5000), Options{MaxAnswer: 1 << 20})
	c := newCaller(t, worker, "job-big", testSecret, Options{Timeout: 10 * time.Second, MaxAnswer: 1000})
	if _, err := c.Call(natstest.Context(t), "echo", nil); !errors.Is(err, ErrAnswerTooLarge) {
		t.Errorf("worker limit: got %v, want ErrAnswerTooLarge", err)
	}
	// The submitter's own limit turns the answer into a tool error.
	serve(t, submitter, "job-big2", testSecret, big(5000), Options{MaxAnswer: 100})
	c2 := newCaller(t, worker, "job-big2", testSecret, Options{Timeout: 10 * time.Second})
	res, err := c2.Call(natstest.Context(t), "echo", nil)
	if err != nil || !res.IsError || !strings.Contains(res.Text, "answer too large") {
		t.Errorf("submitter limit: got %+v, %v; want a tool error", res, err)
	}
	// Beyond NATS's max payload: a tool error, not a lost answer.
	serve(t, submitter, "job-big3", testSecret, big(int(submitter.MaxPayload())+10), Options{MaxAnswer: 8 << 20})
	c3 := newCaller(t, worker, "job-big3", testSecret, Options{Timeout: 10 * time.Second, MaxAnswer: 8 << 20})
	res, err = c3.Call(natstest.Context(t), "echo", nil)
	if err != nil || !res.IsError || !strings.Contains(res.Text, "too large for NATS") {
		t.Errorf("max payload: got %.80q, %v; want a tool error", res.Text, err)
	}
	// Arguments over the worker's limit are refused before sending.
	c4 := newCaller(t, worker, "job-none", testSecret, Options{MaxArgs: 10})
	if _, err := c4.Call(natstest.Context(t), "echo", json.RawMessage(`{"long":"aaaaaaaaaa"}`)); !errors.Is(err, ErrArgsTooLarge) {
		t.Errorf("args: got %v, want ErrArgsTooLarge", err)
	}
	for _, bad := range []string{`[1]`, `{"a":`, `"s"`} {
		if _, err := c4.Call(natstest.Context(t), "echo", json.RawMessage(bad)); err == nil || !strings.Contains(err.Error(), "not a JSON object") {
			t.Errorf("args %s: got %v, want not a JSON object", bad, err)
		}
	}
}

func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
	// Every call must be in flight at once before any is answered.
	const n = 24
	var arrived sync.WaitGroup
	arrived.Add(n)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	serve(t, submitter, "job-many", testSecret, func(ctx context.Context, name string, args json.RawMessage) (string, bool, error) {
		arrived.Done()
		select {
		case <-all:
		case <-ctx.Done():
			return "", true, ctx.Err()
		}
		return echo(ctx, name, args)
	}, Options{MaxActive: n})
	c := newCaller(t, worker, "job-many", testSecret, Options{Timeout: 20 * time.Second})
	errs := make(chan error, n)
	for i := range n {
		go func() {
			args := fmt.Sprintf(`{"i":%d}`, i)
			res, err := c.Call(natstest.Context(t), "echo", json.RawMessage(args))
			if err == nil && res.Text != "echo "+args {
				err = fmt.Errorf("call %d got %q", i, res.Text)
			}
			errs <- err
		}()
	}
	for range n {
		if err := recv(t, errs); err != nil {
			t.Error(err)
		}
	}
}

func TestCancellation(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
	started := make(chan struct{}, 1)
	serve(t, submitter, "job-cancel", testSecret, blockUntilCancelled(started), Options{})
	c := newCaller(t, worker, "job-cancel", testSecret, Options{Timeout: time.Minute})
	ctx, cancel := context.WithCancel(natstest.Context(t))
	done := make(chan error, 1)
	go func() { _, err := c.Call(ctx, "slow", nil); done <- err }()
	recv(t, started)
	cancel()
	if err := recv(t, done); !errors.Is(err, context.Canceled) || errors.Is(err, ErrNoAnswer) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// stop cancels running handlers and waits for them.
func TestStopWaitsForHandlers(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
	started := make(chan struct{}, 1)
	var finished atomic.Bool
	stop, err := Serve(natstest.Context(t), submitter, "job-stop", testSecret, func(ctx context.Context, _ string, _ json.RawMessage) (string, bool, error) {
		started <- struct{}{}
		<-ctx.Done()
		finished.Store(true)
		return "", true, ctx.Err()
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := newCaller(t, worker, "job-stop", testSecret, Options{Timeout: 10 * time.Second})
	done := make(chan error, 1)
	go func() { _, err := c.Call(natstest.Context(t), "slow", nil); done <- err }()
	recv(t, started)
	stop()
	if !finished.Load() {
		t.Error("stop returned before the handler finished")
	}
	stop() // idempotent
	// The cancelled handler's error still answers the worker.
	if err := recv(t, done); err != nil {
		t.Errorf("call after stop: %v", err)
	}
}

func TestConfigValidated(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	nc := natstest.Connect(t, s)
	h := Handler(echo)
	tests := []struct {
		name        string
		nc          *nats.Conn
		job, secret string
		o           Options
	}{
		{"nil conn", nil, "j", testSecret, Options{}},
		{"job id with a dot", nc, "a.b", testSecret, Options{}},
		{"job id wildcard", nc, "*", testSecret, Options{}},
		{"short secret", nc, "j", "short", Options{}},
		{"prefix wildcard", nc, "j", testSecret, Options{Prefix: "agent.>"}},
		{"negative timeout", nc, "j", testSecret, Options{Timeout: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := NewCaller(tt.nc, tt.job, tt.secret, tt.o); !errors.Is(err, ErrConfig) {
				t.Errorf("NewCaller: got %v, want ErrConfig", err)
			}
			if stop, err := Serve(natstest.Context(t), tt.nc, tt.job, tt.secret, h, tt.o); !errors.Is(err, ErrConfig) {
				t.Errorf("Serve: got %v, want ErrConfig", err)
				if stop != nil {
					stop()
				}
			}
		})
	}
}

func TestCustomPrefix(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
	serve(t, submitter, "job-p", testSecret, echo, Options{Prefix: "acme.agent"})
	c := newCaller(t, worker, "job-p", testSecret, Options{Prefix: "acme.agent", Timeout: 10 * time.Second})
	if c.Subject() != "acme.agent.client.job-p" {
		t.Errorf("subject %q", c.Subject())
	}
	if res, err := c.Call(natstest.Context(t), "echo", nil); err != nil || res.Text != "echo {}" {
		t.Fatalf("got %q, %v", res.Text, err)
	}
}

// TestHandlerGetsTheWorkersWait: a handler may run for as long as the
// worker waits (the request's deadline, its JETAGENT_CLIENT_TOOL_TIMEOUT),
// and at least Serve's Timeout. Serve cut every handler at its own
// Timeout, so with submit's default of 60 s a local tool of 63 s failed
// ('tools/call: context deadline exceeded') under a worker waiting 100 s.
func TestHandlerGetsTheWorkersWait(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
	for _, tt := range []struct {
		name          string
		wait, handler time.Duration // the caller's timeout, Serve's
		atLeast       time.Duration // the handler's deadline, from the call's start
	}{
		{"the worker waits longer", time.Hour, time.Millisecond, 59 * time.Minute},
		{"Serve timeout is longer", 10 * time.Second, time.Hour, 59 * time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			job := "job-wait-" + strings.ReplaceAll(tt.name, " ", "-")
			serve(t, submitter, job, testSecret, func(ctx context.Context, _ string, _ json.RawMessage) (string, bool, error) {
				d, ok := ctx.Deadline()
				if !ok {
					return "no deadline", true, nil
				}
				return d.Format(time.RFC3339Nano), false, nil
			}, Options{Timeout: tt.handler})
			c := newCaller(t, worker, job, testSecret, Options{Timeout: tt.wait})
			start := time.Now()
			res, err := c.Call(natstest.Context(t), "echo", nil)
			if err != nil || res.IsError {
				t.Fatalf("%+v, %v", res, err)
			}
			d, err := time.Parse(time.RFC3339Nano, res.Text)
			if err != nil {
				t.Fatal(err)
			}
			if got := d.Sub(start); got < tt.atLeast {
				t.Errorf("the handler's deadline is %s after the call, want at least %s", got, tt.atLeast)
			}
		})
	}
}

// TestStoppedSubmitterSaysSo: a handler cut short by Serve's stop (submit
// interrupted with Ctrl-C while a local tool runs) answered its bare error,
// "toolcache: call hang: ...: context canceled"; the answer now says the
// submitter stopped and the tool may have run.
func TestStoppedSubmitterSaysSo(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	worker, submitter := natstest.Connect(t, s), natstest.Connect(t, s)
	started := make(chan struct{}, 1)
	stop, err := Serve(natstest.Context(t), submitter, "job-stopped", testSecret, blockUntilCancelled(started), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := newCaller(t, worker, "job-stopped", testSecret, Options{Timeout: 20 * time.Second})
	type got struct {
		res toolcache.Result
		err error
	}
	done := make(chan got, 1)
	go func() { res, err := c.Call(natstest.Context(t), "hang", nil); done <- got{res, err} }()
	recv(t, started)
	stop()
	g := recv(t, done)
	if g.err != nil || !g.res.IsError || !strings.Contains(g.res.Text, "the submitter stopped before the tool answered") ||
		!strings.Contains(g.res.Text, "context canceled") {
		t.Errorf("got %+v, %v", g.res, g.err)
	}
}
