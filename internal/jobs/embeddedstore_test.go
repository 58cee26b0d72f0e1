package jobs

import (
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// An embedded store with little room says so at start: nats-server fixes
// its limit when it starts (75% of the disk space free, or MaxStore), and
// a worker restarted on a full store refused jobs with only 'insufficient
// resources'. MaxStore is the limit, and a job refused by the full store
// names it.
func TestEmbeddedSmallStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := EmbeddedConfig{DataDir: dir, MaxStore: 4 << 20}
	s, err := StartEmbedded(cfg)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := ConnectEmbedded(s, EmbeddedConfig{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := natstest.Context(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureTopology(ctx, js, TopologyConfig{}, t.Logf); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, nc)
	fillStore(t, ctx, js)
	if _, err := c.Submit(ctx, &Job{ID: "into-a-full-store", Task: "x"}); err == nil || !strings.Contains(err.Error(), "JETAGENT_MAX_STORE") {
		t.Errorf("Submit to the full store: %v; want it to name JETAGENT_MAX_STORE", err)
	}
	nc.Close()
	s.Shutdown()
	s.WaitForShutdown()

	// Started again on the full store: said at once.
	rec, log := newRecords()
	cfg.Logger = log
	s, err = StartEmbedded(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	warned := func(l string) bool {
		return strings.Contains(l, "the JetStream store is nearly full") && strings.Contains(l, "max_store_bytes=4194304") &&
			strings.Contains(l, "JETAGENT_MAX_STORE")
	}
	if got := rec.atLeast(slog.LevelWarn); !slices.ContainsFunc(got, warned) {
		t.Errorf("no warning of a full store at start; logged at Warn:\n%s", strings.Join(got, "\n"))
	}
}

// A store with room starts without the warning; a negative limit is refused.
func TestEmbeddedStoreLimitChecked(t *testing.T) {
	t.Parallel()
	rec, log := newRecords()
	s, err := StartEmbedded(EmbeddedConfig{DataDir: t.TempDir(), Logger: log, MaxStore: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	if got := rec.atLeast(slog.LevelWarn); len(got) > 0 {
		t.Errorf("a 1 GiB store warned:\n%s", strings.Join(got, "\n"))
	}
	if _, err := StartEmbedded(EmbeddedConfig{DataDir: t.TempDir(), MaxStore: -1}); err == nil || !strings.Contains(err.Error(), "MaxStore") {
		t.Errorf("MaxStore -1: %v", err)
	}
}
