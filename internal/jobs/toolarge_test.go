package jobs

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestTooLargeSaysWhy: a job refused by Client.Submit as too large says
// where its size and the limit come from. A 61,439-byte job file under a
// limit of 61,440 was refused as "job too large: 61457 bytes, limit 61440"
// (the queue Submit fills in counted), and the limit, lowered to the
// server's max_payload, matched no setting the user had made (seen end to
// end with submit --job on a stock nats-server with max_payload 65536).
func TestTooLargeSaysWhy(t *testing.T) {
	t.Parallel()
	small := natstest.Connect(t, startSmallServer(t, 16<<10))
	big := natstest.Connect(t, startServer(t)) // the embedded default: 8 MiB, not lowering the limit
	for _, nc := range []*nats.Conn{small, big} {
		js, _ := jetstream.New(nc)
		if _, err := EnsureTopology(natstest.Context(t), js, TopologyConfig{}, t.Logf); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name string
		big  bool
		job  Job
		want string
		lack string
	}{
		{"no id, no queue, lowered limit", false, Job{Task: strings.Repeat("x", 12280)},
			"job too large: 12343 bytes, limit 12288 (the size is the job as published, with the id and queue filled in; " +
				"the limit is the server's max_payload 16384 less 4096 for headers)", ""},
		{"id and queue given, lowered limit", false, Job{ID: "given", Queue: "default", Task: strings.Repeat("x", 12280)},
			"job too large: 12322 bytes, limit 12288 (the limit is the server's max_payload 16384 less 4096 for headers)", "filled in"},
		{"id and queue given, the configured limit", true, Job{ID: "given", Queue: "default", Task: strings.Repeat("x", DefaultMaxJobBytes)},
			"job too large: 1048618 bytes, limit 1048576", "("},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			nc := small
			if tt.big {
				nc = big
			}
			_, err := newClient(t, nc).Submit(natstest.Context(t), &tt.job)
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), tt.want) ||
				(tt.lack != "" && strings.Contains(err.Error(), tt.lack)) {
				t.Errorf("got %v\nwant %q", err, tt.want)
			}
		})
	}
}
