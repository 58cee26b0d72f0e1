package clienttools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestEveryServeSeesEveryRequest: two Serves of one job, the one that can
// answer and another (a submit --id run again under its own secret, or a
// replaced submitter whose connection the server has not yet found dead,
// here one that never answers). In a queue group (1b065b7, undone by
// 628d2e2) each request went to one of them: the other's share was
// rejected or held unseen, and each such call waited out its timeout.
// Subscribed plainly, every call is answered by the one that can.
func TestEveryServeSeesEveryRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		secret string  // the other Serve's
		h      Handler // the other Serve's
	}{
		{"another secret", strings.Repeat("y", 32), echo},
		{"a silent one", testSecret, func(ctx context.Context, _ string, _ json.RawMessage) (string, bool, error) {
			<-ctx.Done()
			return "", true, ctx.Err()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := natstest.Start(t)
			worker, other, submitter := natstest.Connect(t, s), natstest.Connect(t, s), natstest.Connect(t, s)
			const job = "job-two-serves"
			serve(t, other, job, tc.secret, tc.h, Options{OnReject: func(error) {}})
			serve(t, submitter, job, testSecret, echo, Options{})
			// Long enough for a loaded machine; a call the other Serve
			// took would wait it out.
			c := newCaller(t, worker, job, testSecret, Options{Timeout: 10 * time.Second})
			// Calls enough that a share going elsewhere is all but sure
			// (each would go to either with even odds: 2^-12 none does).
			const calls = 12
			var wg sync.WaitGroup
			errs := make(chan error, calls)
			for i := range calls {
				wg.Go(func() {
					args := json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))
					res, err := c.Call(natstest.Context(t), "note", args)
					if err != nil || res.IsError || res.Text != "note "+string(args) {
						errs <- fmt.Errorf("call %d: %+v, %w", i, res, err)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}
