package jobs

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// A client on a server without JetStream is told to enable it, not asked
// whether a worker runs (none could have, there).
func TestOpenTopologyWithoutJetStream(t *testing.T) {
	t.Parallel()
	opts := natstest.Options(t.TempDir())
	opts.JetStream = false
	nc := natstest.Connect(t, natstest.StartWith(t, opts))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenTopology(natstest.Context(t), js, Names{})
	if err == nil || !strings.Contains(err.Error(), "is JetStream enabled on the NATS server?") || strings.Contains(err.Error(), "is a worker running") {
		t.Fatalf("error %v, want the JetStream hint", err)
	}
}
