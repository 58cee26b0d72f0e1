package clienttools

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/jetagent/jetagent/internal/natstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, natstest.GoleakOptions()...) }

const testSecret = "0123456789abcdef0123456789abcdef"

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
