package clienttools

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testSecret = "0123456789abcdef0123456789abcdef"

// startNATS runs a real embedded nats-server (JetStream on, store in
// t.TempDir(), random port) for the test.
func startNATS(t *testing.T) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT,
		JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

func connect(t *testing.T, s *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newCaller(t *testing.T, nc *nats.Conn, jobID, secret string, o Options) *Caller {
	t.Helper()
	c, err := NewCaller(nc, jobID, secret, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func serve(t *testing.T, nc *nats.Conn, jobID, secret string, h Handler, o Options) {
	t.Helper()
	stop, err := Serve(context.Background(), nc, jobID, secret, h, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
}

// echo answers with the tool name and its arguments.
func echo(_ context.Context, name string, args json.RawMessage) (string, bool, error) {
	return name + " " + string(args), false, nil
}

// blockUntilCancelled signals started, then waits for its context.
func blockUntilCancelled(started chan<- struct{}) Handler {
	return func(ctx context.Context, _ string, _ json.RawMessage) (string, bool, error) {
		started <- struct{}{}
		<-ctx.Done()
		return "", true, ctx.Err()
	}
}

func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting")
		panic("unreachable")
	}
}
