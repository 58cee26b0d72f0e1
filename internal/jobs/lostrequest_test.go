package jobs

import (
	"bytes"
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// dropProxy forwards TCP connections to a NATS server; while dropping, it
// swallows what clients send, as a server does with requests it took just
// before it was killed: the client's connection stays up, no answer comes.
// cut closes every connection (the clients reconnect, through the proxy).
//
// With match set, only the first read containing match is swallowed (then
// dropping ends by itself), read from the server (answers) when fromServer
// is set, else from the clients: one lost request or answer.
type dropProxy struct {
	l          net.Listener
	target     string
	dropping   atomic.Bool
	dropped    chan struct{} // a byte was swallowed
	match      []byte
	fromServer bool

	mu    sync.Mutex
	conns []net.Conn
	once  sync.Once
}

// dropMatching makes a proxy swallow only the first read containing match
// (see dropProxy).
func dropMatching(match string, fromServer bool) func(*dropProxy) {
	return func(p *dropProxy) { p.match, p.fromServer = []byte(match), fromServer }
}

func startDropProxy(t *testing.T, target string, opts ...func(*dropProxy)) *dropProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{l: l, target: target, dropped: make(chan struct{})}
	for _, o := range opts {
		o(p)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = l.Close(); p.cut(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			wg.Go(func() { p.pump(s, c, true); _ = c.Close() })
			wg.Go(func() { p.pump(c, s, false); _ = s.Close() })
		}
	})
	return p
}

// pump copies from src to dst, swallowing what the proxy drops.
func (p *dropProxy) pump(src, dst net.Conn, fromServer bool) {
	if fromServer && p.match == nil {
		_, _ = io.Copy(dst, src)
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.swallow(buf[:n], fromServer) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// swallow reports whether b, read in the direction fromServer says, is to
// be dropped.
func (p *dropProxy) swallow(b []byte, fromServer bool) bool {
	if fromServer != p.fromServer || !p.dropping.Load() {
		return false
	}
	if p.match != nil {
		if !bytes.Contains(b, p.match) || !p.dropping.CompareAndSwap(true, false) {
			return false
		}
	}
	p.once.Do(func() { close(p.dropped) })
	return true
}

func (p *dropProxy) url() string { return "nats://" + p.l.Addr().String() }

func (p *dropProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// A journal request the server never answers (it took it and was killed)
// costs one try, not the journal's whole bound: once the connection is
// back the next try is answered. One try used to wait out the 10 s bound,
// so the put failed (the job handed back) and the load failed (another
// redelivery), although NATS had been back for seconds.
func TestJournalRequestLostInARestart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		op   func(ctx context.Context, e *runEnv) error
	}{
		{"put", func(ctx context.Context, e *runEnv) error {
			return e.Journal().Put(ctx, "c1.0", []byte(`{"kind":"intent"}`))
		}},
		{"load", func(ctx context.Context, e *runEnv) error {
			_, err := e.LoadJournal(ctx)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t)
			p := startDropProxy(t, s.Addr().String())
			nc, err := nats.Connect(p.url(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			w, _ := startWorker(t, nc, Config{Runner: newTestRunner()})
			e := &runEnv{w: w, jobID: "lost", attempt: 2, fenced: new(atomic.Bool)}
			p.dropping.Store(true)
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- tc.op(context.Background(), e) }()
			select {
			case <-p.dropped:
			case <-time.After(waitTimeout):
				t.Fatal("the request was not sent")
			}
			p.dropping.Store(false)
			p.cut()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
				}
				if d := time.Since(start); d >= journalOpBound {
					t.Errorf("took %s, the whole bound", d)
				}
			case <-time.After(waitTimeout):
				t.Fatal("no answer")
			}
		})
	}
}
