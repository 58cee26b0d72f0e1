package jobs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/natstest"
)

// A NATS user the server does not let use the JetStream API gets no
// answer to its requests (the refusal is an asynchronous error): the
// worker took that for JetStream not answering yet and retried its
// topology setup for ever, and submit said no worker seemed to run. Both
// now fail with the server's refusal and what to check.
func TestPermissionViolationIsNamed(t *testing.T) {
	t.Parallel()
	only := []string{"agent.>", "_INBOX.>"} // no $JS.API.>
	o := natstest.Options(t.TempDir())
	o.Users = []*server.User{{Username: "agent", Password: "pw", Permissions: &server.Permissions{
		Publish: &server.SubjectPermission{Allow: only}, Subscribe: &server.SubjectPermission{Allow: only},
	}}}
	s := natstest.StartWith(t, o)
	for _, tc := range []struct {
		name string
		open func(ctx context.Context, nc *nats.Conn) error
	}{
		{"worker", func(ctx context.Context, nc *nats.Conn) error {
			// No StartTimeout: it used to wait until stopped.
			w, err := NewWorker(Config{Conn: nc, Runner: RunnerFunc(echoRunner), WorkerID: "w1"})
			if err != nil {
				return err
			}
			return w.Run(ctx)
		}},
		{"client", func(ctx context.Context, nc *nats.Conn) error {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second) // as submit's
			defer cancel()
			_, err := NewClient(ctx, nc, ClientConfig{})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			nc := natstest.Connect(t, s, nats.UserInfo("agent", "pw"),
				nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
			ctx := natstest.Context(t)
			done := make(chan error, 1)
			go func() { done <- tc.open(ctx, nc) }()
			var err error
			select {
			case err = <-done:
			case <-ctx.Done():
				t.Fatal("still waiting for a server that refuses the user")
			}
			if !errors.Is(err, nats.ErrPermissionViolation) {
				t.Fatalf("err %v, want a permissions violation", err)
			}
			for _, want := range []string{`"$JS.API.`, "permission"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err %q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "is a worker running") {
				t.Errorf("err %q blames a missing worker", err)
			}
		})
	}
}
