package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// routeProxy forwards the route connections of one pair of cluster nodes;
// blocked, it closes those it carries and every new one at once: the two
// nodes are cut off from each other, each still up for its clients.
type routeProxy struct {
	l       net.Listener
	target  func() string // set before the first connection comes
	blocked atomic.Bool

	mu    sync.Mutex
	conns []net.Conn
}

func startRouteProxy(t *testing.T, target func() string) *routeProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &routeProxy{l: l, target: target}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = l.Close(); p.closeAll(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if p.blocked.Load() {
				_ = c.Close()
				continue
			}
			s, err := net.Dial("tcp", target())
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(c, s); _ = c.Close() })
			wg.Go(func() { _, _ = io.Copy(s, c); _ = s.Close() })
		}
	})
	return p
}

func (p *routeProxy) url() string { return "nats://" + p.l.Addr().String() }

func (p *routeProxy) block() {
	p.blocked.Store(true)
	p.closeAll()
}

func (p *routeProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// splitCluster is a three-node cluster whose first node can be cut off
// from the other two (a network partition: n1 in the minority, n2 and n3
// keeping quorum) and joined again.
type splitCluster struct {
	t       *testing.T
	nodes   []*server.Server
	proxies []*routeProxy // every route of n1 goes through one of these
}

// startSplitCluster starts the cluster. Each route of n1 goes through a
// proxy (n1 to n2, n1 to n3, n2 to n1, n3 to n1); n2 and n3 route to
// each other directly. No node advertises a reachable route address, so
// gossip cannot open a route around the proxies.
func startSplitCluster(t *testing.T) *splitCluster {
	t.Helper()
	// The proxies listen first: a port of theirs could otherwise be one
	// FreePorts has just picked, and released, for a node.
	var targets [3]atomic.Value
	target := func(i int) func() string {
		return func() string { s, _ := targets[i].Load().(string); return s }
	}
	p12, p13 := startRouteProxy(t, target(1)), startRouteProxy(t, target(2))
	p21, p31 := startRouteProxy(t, target(0)), startRouteProxy(t, target(0))
	ports := natstest.FreePorts(t, 3)
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	for i := range targets {
		targets[i].Store(addr(i))
	}
	routes := [][]string{
		{p12.url(), p13.url()},
		{p21.url(), "nats://" + addr(2)},
		{p31.url(), "nats://" + addr(1)},
	}
	sc := &splitCluster{t: t, proxies: []*routeProxy{p12, p13, p21, p31}}
	for i := range 3 {
		s, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("n%d", i+1),
			Host:       "127.0.0.1", Port: server.RANDOM_PORT,
			JetStream: true, StoreDir: t.TempDir(),
			Cluster: server.ClusterOpts{
				Name: "jetagent-split", Host: "127.0.0.1", Port: ports[i],
				// Port 1: nothing listens there, so a route learnt by
				// gossip fails; only the configured routes connect.
				Advertise: "127.0.0.1:1",
			},
			Routes: server.RoutesFromStr(strings.Join(routes[i], ",")),
			NoSigs: true, NoLog: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		if !s.ReadyForConnections(waitTimeout) {
			t.Fatalf("%s not ready", s.Name())
		}
		sc.nodes = append(sc.nodes, s)
	}
	pollUntil(t, "meta leader with all peers", func() bool {
		leaders := 0
		for _, s := range sc.nodes {
			if s.NumRemotes() != 2 || !s.JetStreamIsCurrent() {
				return false
			}
			if s.JetStreamIsLeader() {
				leaders++
				if len(s.JetStreamClusterPeers()) != 3 {
					return false
				}
			}
		}
		return leaders == 1
	})
	return sc
}

// isolate cuts n1 off from n2 and n3.
func (sc *splitCluster) isolate() {
	sc.t.Helper()
	for _, p := range sc.proxies {
		p.block()
	}
	pollUntil(sc.t, "n1 cut off", func() bool {
		return sc.nodes[0].NumRemotes() == 0 && sc.nodes[1].NumRemotes() == 1 && sc.nodes[2].NumRemotes() == 1
	})
}

// heal joins n1 to the others again.
func (sc *splitCluster) heal() {
	sc.t.Helper()
	for _, p := range sc.proxies {
		p.blocked.Store(false)
	}
	// Routed, and JetStream answering again: one meta leader that every
	// node follows (its API says "temporarily unavailable" until then).
	pollUntil(sc.t, "n1 routed again", func() bool { return oneMetaLeader(sc.nodes) })
}

// leadStreamsFrom makes node lead every stream of the topology and the
// consumers named ("stream/consumer"), by asking each leader elsewhere
// to step down in its favour.
func leadStreamsFrom(t *testing.T, nc *nats.Conn, node string, streams, consumers []string) {
	t.Helper()
	type leaderInfo struct {
		Cluster *struct {
			Leader string `json:"leader"`
		} `json:"cluster"`
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	body := fmt.Appendf(nil, `{"placement":{"preferred":%q}}`, node)
	lead := func(infoSubj, downSubj string) {
		t.Helper()
		asked := time.Time{}
		pollUntil(t, node+" leading "+infoSubj, func() bool {
			m, err := nc.Request(infoSubj, nil, 2*time.Second)
			if err != nil {
				return false
			}
			var li leaderInfo
			if json.Unmarshal(m.Data, &li) != nil || li.Cluster == nil {
				return false
			}
			if li.Cluster.Leader == node {
				return true
			}
			// Once a second at most: an election takes its time.
			if li.Cluster.Leader != "" && time.Since(asked) > time.Second {
				asked = time.Now()
				_, _ = nc.Request(downSubj, body, 2*time.Second)
			}
			return false
		})
	}
	for _, s := range streams {
		lead("$JS.API.STREAM.INFO."+s, "$JS.API.STREAM.LEADER.STEPDOWN."+s)
	}
	for _, sc := range consumers {
		s, c, _ := strings.Cut(sc, "/")
		lead("$JS.API.CONSUMER.INFO."+s+"."+c, "$JS.API.CONSUMER.LEADER.STEPDOWN."+s+"."+c)
	}
}

// allStreams are every stream of the default topology, the journal's too.
var allStreams = append([]string{"KV_AGENT_JOURNAL"}, streamNames...)

// interleaved reports whether an event of an earlier attempt follows one
// of a later attempt.
func interleaved(attempts []int) bool {
	highest := 0
	for _, a := range attempts {
		if a < highest {
			return true
		}
		highest = max(highest, a)
	}
	return false
}

// withinWait waits for ch or fails the test after waitTimeout.
func withinWait[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("no %s within %s", what, waitTimeout)
	}
	var zero T
	return zero
}

// fixedCluster is a three-node cluster on fixed ports and stores, so its
// nodes can be stopped and started again as they were (a restart, or the
// whole cluster's).
type fixedCluster struct {
	t      *testing.T
	client []int
	route  []int
	dirs   []string
	nodes  []*server.Server
}

func startFixedCluster(t *testing.T) *fixedCluster {
	t.Helper()
	ports := natstest.FreePorts(t, 6)
	fc := &fixedCluster{t: t, client: ports[:3], route: ports[3:], nodes: make([]*server.Server, 3)}
	for range 3 {
		fc.dirs = append(fc.dirs, t.TempDir())
	}
	t.Cleanup(func() {
		for _, s := range fc.nodes {
			if s != nil {
				s.Shutdown()
				s.WaitForShutdown()
			}
		}
	})
	fc.startAll()
	return fc
}

// urls is every node's client URL, for a connection that fails over.
func (fc *fixedCluster) urls() string {
	var u []string
	for _, p := range fc.client {
		u = append(u, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	return strings.Join(u, ",")
}

func (fc *fixedCluster) start(i int) {
	fc.t.Helper()
	var routes []string
	for _, p := range fc.route {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	s, err := server.NewServer(&server.Options{
		ServerName: fmt.Sprintf("n%d", i+1),
		Host:       "127.0.0.1", Port: fc.client[i],
		JetStream: true, StoreDir: fc.dirs[i],
		Cluster: server.ClusterOpts{Name: "jetagent-fixed", Host: "127.0.0.1", Port: fc.route[i]},
		Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		NoSigs:  true, NoLog: true,
	})
	if err != nil {
		fc.t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(waitTimeout) {
		fc.t.Fatalf("%s not ready", s.Name())
	}
	fc.nodes[i] = s
}

func (fc *fixedCluster) stop(i int) {
	fc.nodes[i].Shutdown()
	fc.nodes[i].WaitForShutdown()
	fc.nodes[i] = nil
}

// startAll starts every node and waits for a meta leader all follow.
func (fc *fixedCluster) startAll() {
	fc.t.Helper()
	for i := range fc.nodes {
		fc.start(i)
	}
	pollUntil(fc.t, "meta leader with all peers", func() bool { return oneMetaLeader(fc.nodes) })
}

// settledEventAttempts is eventAttempts once the cluster answers again
// (a node that rejoined can have groups elect their leaders anew, and
// JetStream is "temporarily unavailable" meanwhile), read message by
// message from the stream's leader: no consumer, which would need the
// meta leader.
func settledEventAttempts(t *testing.T, c *Client, id string) []int {
	t.Helper()
	var out []int
	pollUntil(t, "the events of "+id, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		info, err := c.topo.Events.Info(ctx)
		if err != nil {
			return false
		}
		out = out[:0]
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := c.topo.Events.GetMsg(ctx, seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			if err != nil {
				return false
			}
			var ev Event
			if subjectMatches(c.names.EventsFilter(id), m.Subject) && json.Unmarshal(m.Data, &ev) == nil {
				out = append(out, ev.Attempt)
			}
		}
		return true
	})
	return out
}

// failLog is a logger whose lines the test prints only when it failed.
func failLog(t *testing.T) *slog.Logger {
	t.Helper()
	var buf syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("worker logs:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(&buf, nil))
}

// pollStatus waits until job id's state is final, reading it (no watch:
// a watch's consumer needs the meta leader, which may be on the cut-off
// node, being elected again on the other side).
func pollStatus(t *testing.T, c *Client, id string) *State {
	t.Helper()
	var st *State
	pollUntil(t, id+" settled", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s, err := c.Status(ctx, id)
		if err != nil || !s.Status.Terminal() {
			return false
		}
		st = s
		return true
	})
	return st
}

// oneMetaLeader: every node is routed to the other two and current, and
// one of them leads JetStream's meta group (its API answers "temporarily
// unavailable" until then).
func oneMetaLeader(nodes []*server.Server) bool {
	leaders := 0
	for _, s := range nodes {
		if s.NumRemotes() != 2 || !s.JetStreamIsCurrent() {
			return false
		}
		if s.JetStreamIsLeader() {
			leaders++
		}
	}
	return leaders == 1
}
