package jobs

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestStreamWindowsTheServerTakes: retention and duplicate settings the
// worker accepts are ones the NATS server takes. A dead-letter max age
// under 2 minutes (JETAGENT_DLQ_MAX_AGE=1m) stopped the worker at its
// start, on a new deployment and on an existing one, with the server's
// "duplicates window can not be larger then max age" (the DLQ's duplicate
// window was 2 minutes whatever its max age); a duplicate window or max
// age under the server's least (100ms) passed the worker's check and
// failed the same way. Now the DLQ's window stays within its max age, and
// a value under 100ms is refused by Validate, naming it.
func TestStreamWindowsTheServerTakes(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	ctx := natstest.Context(t)
	js, _ := jetstream.New(nc)

	for i, tt := range []struct {
		name   string
		maxAge time.Duration
	}{
		{"one minute", time.Minute},
		{"one second", time.Second},
		{"the least", 100 * time.Millisecond},
		{"kept until purged", 0},
	} {
		for _, existing := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s existing=%v", tt.name, existing), func(t *testing.T) {
				cfg := TopologyConfig{Names: Names{Prefix: fmt.Sprintf("dlq%d-%v", i, existing)}, Queues: []string{"q"}}
				if existing { // made with the defaults first: updated
					if _, err := EnsureTopology(ctx, js, cfg, t.Logf); err != nil {
						t.Fatal(err)
					}
				}
				cfg.DLQMaxAge = tt.maxAge
				if err := cfg.WithDefaults().Validate(); err != nil {
					t.Fatalf("Validate: %v", err)
				}
				topo, err := EnsureTopology(ctx, js, cfg, t.Logf)
				if err != nil {
					t.Fatalf("JETAGENT_DLQ_MAX_AGE=%s: %v", tt.maxAge, err)
				}
				info, err := topo.DLQ.Info(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if info.Config.MaxAge != tt.maxAge || info.Config.Duplicates <= 0 ||
					(tt.maxAge > 0 && info.Config.Duplicates > tt.maxAge) {
					t.Errorf("DLQ max age %s, duplicate window %s", info.Config.MaxAge, info.Config.Duplicates)
				}
			})
		}
	}

	for _, tt := range []struct {
		name string
		cfg  TopologyConfig
		want string
	}{
		{"duplicate window 1ns", TopologyConfig{DuplicateWindow: time.Nanosecond}, "duplicate window must be at least 100ms (got 1ns)"},
		{"duplicate window 99ms", TopologyConfig{DuplicateWindow: 99 * time.Millisecond}, "duplicate window must be at least 100ms (got 99ms)"},
		{"events max age 50ms", TopologyConfig{EventsMaxAge: 50 * time.Millisecond}, "events max age must be at least 100ms (got 50ms)"},
		{"dlq max age 1ms", TopologyConfig{DLQMaxAge: time.Millisecond}, "dead-letter max age must be 0 (kept until purged) or at least 100ms (got 1ms)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.WithDefaults().Validate()
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate: %v, want %q", err, tt.want)
			}
		})
	}
}
