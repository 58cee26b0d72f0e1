package jobs

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestSubmitToAFullStoreSaysSo: a job submitted while the JetStream store
// is full is refused with what that means. submit printed only 'state of
// full-4: nats: nats: API error: code=503 err_code=10023
// description=insufficient resources' (seen end to end with a stock
// nats-server whose max_file_store had filled). The server's error is
// kept for errors.As.
func TestSubmitToAFullStoreSaysSo(t *testing.T) {
	t.Parallel()
	nc, js, ctx := smallStore(t, TopologyConfig{})
	c := newClient(t, nc)
	fillStore(t, ctx, js)
	_, err := c.Submit(ctx, &Job{ID: "into-a-full-store", Task: "x"})
	var apiErr *jetstream.APIError
	if err == nil || !strings.Contains(err.Error(), "the JetStream store is full: the server's max_file_store or the account's storage limit is reached") ||
		!errors.As(err, &apiErr) || apiErr.ErrorCode != jsInsufficientResources {
		t.Errorf("Submit: %v", err)
	}
	// The store answered: said at once, not tried again for the state
	// bound and then called unavailable.
	if errors.Is(err, errStateUnavailable) {
		t.Errorf("Submit: %v; a full store is not an unavailable one", err)
	}
}
