package natstest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
)

// WaitTimeout bounds every wait in tests: generous, because the machines
// are shared; waits end as soon as the awaited thing happens.
const WaitTimeout = 30 * time.Second

// Options are a test server's settings: JetStream on, a random loopback
// port, the store in dir.
func Options(dir string) *server.Options {
	return &server.Options{
		JetStream: true, StoreDir: dir,
		Host: "127.0.0.1", Port: server.RANDOM_PORT,
		NoLog: true, NoSigs: true,
	}
}

// Start runs an embedded JetStream server until the test ends.
func Start(tb testing.TB) *server.Server {
	tb.Helper()
	return StartWith(tb, Options(tb.TempDir()))
}

// StartWith runs a server with opts until the test ends.
func StartWith(tb testing.TB, opts *server.Options) *server.Server {
	tb.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		tb.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(WaitTimeout) {
		s.Shutdown()
		tb.Fatal("natstest: server not ready")
	}
	tb.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// Connect connects to s until the test ends.
func Connect(tb testing.TB, s *server.Server, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// Context is a context that ends after WaitTimeout or with the test.
func Context(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	tb.Cleanup(cancel)
	return ctx
}

// GoleakOptions are the goroutines goleak must ignore in a package whose
// tests run NATS, each a library's and not ours; pass them, with any of
// the package's own, to goleak.VerifyTestMain.
func GoleakOptions(more ...goleak.Option) []goleak.Option {
	return append([]goleak.Option{
		// nats.go v1.55 race: ObjectStore.Put makes a private JetStream
		// context and cleans it up at once; when the cleanup wins, the
		// reconnect watcher it started reads a nil channel forever.
		goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"),
		// nats-server 2.15.2: a stream whose file store is opened while its
		// server shuts down (a cluster node stopped mid-test) can miss the
		// shutdown sweep, leaving the store's flush loop and the
		// access-time ticker it keeps registered. Both goroutines are the
		// server's, not ours (a server we forgot to stop would show its
		// accept loops too).
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
		// regexp2's clock, which codemode's match bound starts: it stops
		// by itself a second after the last match's deadline (30 s on).
		goleak.IgnoreAnyFunction("github.com/dlclark/regexp2/v2.runClock"),
	}, more...)
}

// FreePorts returns n distinct loopback ports nothing listens on now (each
// held until all are chosen, so none is returned twice), for servers whose
// addresses must be known before they start.
func FreePorts(tb testing.TB, n int) []int {
	tb.Helper()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		defer ln.Close() //nolint:errcheck // only held while choosing
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// FreePort is one of FreePorts.
func FreePort(tb testing.TB) int {
	tb.Helper()
	return FreePorts(tb, 1)[0]
}
