package main

import (
	"bytes"
	"net"
	"sync"
	"time"
)

// delayProxy forwards TCP connections to target, holding every chunk of
// bytes for delay in each direction, in order: a network with a round trip
// of twice the delay between a worker and its NATS server. A job's
// sequential round trips then cost it that round trip each, so the extra
// time per job, divided by the round trip, counts them.
type delayProxy struct {
	ln     net.Listener
	target string
	delay  time.Duration

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startProxy(target string, delay time.Duration) (*delayProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &delayProxy{ln: ln, target: target, delay: delay}
	p.wg.Go(p.serve)
	return p, nil
}

// URL is the nats:// address to connect to instead of target.
func (p *delayProxy) URL() string { return "nats://" + p.ln.Addr().String() }

func (p *delayProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(s, c) })
		p.wg.Go(func() { p.pipe(c, s) })
	}
}

// pipe copies src to dst, each chunk delay after it was read.
func (p *delayProxy) pipe(dst, src net.Conn) {
	type chunk struct {
		at time.Time
		b  []byte
	}
	ch := make(chan chunk, 4096)
	var wg sync.WaitGroup
	wg.Go(func() {
		for c := range ch {
			if w := time.Until(c.at); w > 0 {
				time.Sleep(w)
			}
			if _, err := dst.Write(c.b); err != nil {
				break
			}
		}
		_ = dst.Close()
		for range ch { // drain after a write failed
		}
	})
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			ch <- chunk{time.Now().Add(p.delay), bytes.Clone(buf[:n])}
		}
		if err != nil {
			break
		}
	}
	close(ch)
	wg.Wait()
	_ = src.Close()
}

// Close stops the proxy and its connections.
func (p *delayProxy) Close() error {
	err := p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}
