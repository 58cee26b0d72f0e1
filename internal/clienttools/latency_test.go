package clienttools

import (
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestNoSubmitterBehindLatency: with the NATS server 400 ms away (its
// bytes reach the worker that late), the timeout still says nobody
// listens. Each request is answered "no responders" (503), one round trip
// later; the republish just before the timeout (at about 1.9 s of 2.1 s)
// had its 503 still on the way when the timeout came, and the call, taken
// to be listening since that republish, said "the submitter did not
// answer". Now each publish is flushed: the server sends the 503 before
// the flush's PONG, so the verdict on a publish is in before the wait goes
// on, and a publish whose flush the timeout cut short leaves the last
// verdict standing.
func TestNoSubmitterBehindLatency(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	nc, err := nats.Connect(slowLink(t, s.Addr().String(), 400*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c := newCaller(t, nc, "job-far", testSecret, Options{Timeout: 2100 * time.Millisecond})
	_, err = c.Call(natstest.Context(t), "echo", nil)
	if !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "no submitter listening on agent.client.job-far") {
		t.Fatalf("got %v, want ErrNoAnswer naming the missing listener", err)
	}
}

// slowLink is a TCP proxy to addr whose bytes from addr arrive delay late,
// in order: a server that far away. The delay is the link's; nothing in
// the test waits on it.
func slowLink(t *testing.T, addr string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	track := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", addr)
			if err != nil {
				_ = client.Close()
				continue
			}
			track(client)
			track(server)
			wg.Go(func() {
				_, _ = io.Copy(server, client)
				_ = server.Close()
			})
			type chunk struct {
				at time.Time
				b  []byte
			}
			chunks := make(chan chunk, 1024)
			wg.Go(func() {
				defer close(chunks)
				for {
					b := make([]byte, 32<<10)
					n, err := server.Read(b)
					if n > 0 {
						chunks <- chunk{time.Now().Add(delay), b[:n]}
					}
					if err != nil {
						return
					}
				}
			})
			wg.Go(func() {
				defer client.Close() //nolint:errcheck // the proxy's end
				for c := range chunks {
					time.Sleep(time.Until(c.at)) // the link's latency
					if _, err := client.Write(c.b); err != nil {
						return
					}
				}
			})
		}
	})
	return "nats://" + ln.Addr().String()
}

// noRespondersQueued finds a 503 already on the inbox without waiting: the
// timeout's last look, when the deadline was seen before the status was read.
func TestNoRespondersQueued(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, natstest.Start(t))
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if noRespondersQueued(sub) {
		t.Error("a 503 found on an empty inbox")
	}
	if err := nc.PublishMsg(&nats.Msg{Subject: "nobody.here", Reply: inbox}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil { // the 503 comes before the PONG
		t.Fatal(err)
	}
	if !noRespondersQueued(sub) {
		t.Error("the queued 503 was not found")
	}
	if n, _, _ := sub.Pending(); n != 0 {
		t.Errorf("%d messages left on the inbox", n)
	}
}
