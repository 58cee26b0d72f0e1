package clienttools

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/natstest"
)

// gatedDialer dials normally the first time; later dials fail until open
// is closed, so the test decides when a connection comes back.
type gatedDialer struct {
	dials atomic.Int32
	open  chan struct{}
}

func (d *gatedDialer) Dial(network, address string) (net.Conn, error) {
	if d.dials.Add(1) > 1 {
		select {
		case <-d.open:
		default:
			return nil, errors.New("gated")
		}
	}
	var nd net.Dialer
	return nd.Dial(network, address)
}

// TestAnswerLostInANATSRestart: NATS restarted while a client tool ran on
// the submitter's side. The submitter reconnected first and published its
// answer before the worker's connection was back with its inbox, so the
// answer went nowhere: the call waited out its whole timeout saying "the
// submitter did not answer", though the tool had run (and a model calls
// it again). Now the worker sends the request again once it reconnects and
// Serve, which remembers the answer, sends it again without running the
// tool a second time.
func TestAnswerLostInANATSRestart(t *testing.T) {
	t.Parallel()
	opts := natstest.Options(t.TempDir())
	opts.Port = natstest.FreePort(t)
	s := natstest.StartWith(t, opts)
	gate := &gatedDialer{open: make(chan struct{})}
	worker := natstest.Connect(t, s, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond), nats.SetCustomDialer(gate))
	submitterBack := make(chan struct{}, 1)
	submitter := natstest.Connect(t, s, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
		nats.ReconnectHandler(func(*nats.Conn) { submitterBack <- struct{}{} }))

	started, release := make(chan struct{}, 1), make(chan struct{})
	var runs atomic.Int32
	serve(t, submitter, "job-restart", testSecret, func(context.Context, string, json.RawMessage) (string, bool, error) {
		runs.Add(1)
		started <- struct{}{}
		<-release
		return "written once", false, nil
	}, Options{})
	c := newCaller(t, worker, "job-restart", testSecret, Options{Timeout: 20 * time.Second})
	type result struct {
		text string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		res, err := c.Call(context.Background(), "write", nil)
		done <- result{res.Text, err}
	}()
	recv(t, started)

	s.Shutdown()
	s.WaitForShutdown()
	s = natstest.StartWith(t, opts)
	recv(t, submitterBack)
	// A spy on the restarted server sees the answer arrive there while
	// the worker's inbox is not subscribed again yet.
	spy := natstest.Connect(t, s)
	answers := make(chan *nats.Msg, 1)
	sub, err := spy.Subscribe("_INBOX.>", func(m *nats.Msg) { answers <- m })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe() //nolint:errcheck
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	close(release)
	recv(t, answers)
	close(gate.open) // the worker comes back after its answer went by

	r := recv(t, done)
	if r.err != nil || r.text != "written once" {
		t.Errorf("call: %q, %v; want the answer the submitter gave", r.text, r.err)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
}
