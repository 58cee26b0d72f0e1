package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

func TestEnsureTopology(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	ctx := natstest.Context(t)
	js, _ := jetstream.New(nc)
	var logs []string
	logf := func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }

	cfg := TopologyConfig{Names: Names{Prefix: "team-a"}, Queues: []string{"default", "bulk"}}
	topo, err := EnsureTopology(ctx, js, cfg, logf)
	if err != nil {
		t.Fatal(err)
	}
	info, err := topo.Jobs.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := info.Config; c.Name != "TEAM_A_JOBS" || c.Retention != jetstream.WorkQueuePolicy ||
		c.Storage != jetstream.FileStorage || c.Duplicates != DefaultDuplicateWindow || c.Subjects[0] != "team-a.jobs.*" {
		t.Errorf("jobs stream %+v", c)
	}
	if len(topo.Consumers) != 2 {
		t.Errorf("consumers %v", topo.Consumers)
	}

	// Idempotent: a second worker with the same settings changes nothing.
	if _, err := EnsureTopology(ctx, js, cfg, logf); err != nil || len(logs) != 0 {
		t.Fatalf("second ensure: %v, logs %q", err, logs)
	}

	// Mutable differences are updated and reported.
	cfg.DuplicateWindow, cfg.MaxDeliver = 2*time.Hour, 7
	if _, err := EnsureTopology(ctx, js, cfg, logf); err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(logs, "\n")
	for _, want := range []string{
		"updated stream TEAM_A_JOBS, which had duplicate window 1h0m0s (want 2h0m0s)",
		"updated consumer TEAM_A_JOBS/workers-default, which had max deliver 5 (want 7)",
		"updated consumer TEAM_A_JOBS/workers-bulk, which had max deliver 5 (want 7)",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("logs lack %q:\n%s", want, joined)
		}
	}
}

func TestEnsureTopologyRefusesConflicts(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	ctx := natstest.Context(t)
	js, _ := jetstream.New(nc)
	// Someone made AGENT_JOBS as a plain limits stream.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "AGENT_JOBS", Subjects: []string{"agent.jobs.*"}}); err != nil {
		t.Fatal(err)
	}
	_, err := EnsureTopology(ctx, js, TopologyConfig{}, nil)
	if !errors.Is(err, ErrTopology) || !strings.Contains(err.Error(), "stream AGENT_JOBS exists with retention Limits") {
		t.Fatalf("got %v", err)
	}
	// The stream was not touched.
	st, _ := js.Stream(ctx, "AGENT_JOBS")
	if st.CachedInfo().Config.Retention != jetstream.LimitsPolicy {
		t.Error("conflicting stream was changed")
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	r := newTestRunner()
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no connection", Config{Runner: r}, "a NATS connection is required"},
		{"no runner", Config{Conn: nc}, "a Runner is required"},
		{"bad queue", Config{Conn: nc, Runner: r, Topology: TopologyConfig{Queues: []string{"a.b"}}}, `queue "a.b"`},
		{"bad prefix", Config{Conn: nc, Runner: r, Topology: TopologyConfig{Names: Names{Prefix: "a.b"}}}, `prefix "a.b"`},
		{"concurrency", Config{Conn: nc, Runner: r, Concurrency: -1}, "concurrency must be 1..10000 (got -1)"},
		{"concurrency over the bound", Config{Conn: nc, Runner: r, Concurrency: MaxConcurrency + 1}, "concurrency must be 1..10000 (got 10001)"},
		{"ack wait over a day", Config{Conn: nc, Runner: r, Topology: TopologyConfig{AckWait: 25 * time.Hour}}, "ack wait must be at most 24h0m0s"},
		{"backoff step over a day", Config{Conn: nc, Runner: r, Topology: TopologyConfig{MaxDeliver: 2, BackOff: []time.Duration{time.Minute, 25 * time.Hour}}},
			"backoff steps must be at most 24h0m0s (got 25h0m0s)"},
		{"heartbeat", Config{Conn: nc, Runner: r, Heartbeat: time.Minute}, "heartbeat 1m0s must be positive and at most half the ack wait 30s"},
		// Accepted before: every job was fenced before its first heartbeat.
		{"heartbeat over half", Config{Conn: nc, Runner: r, Heartbeat: 21 * time.Second}, "heartbeat 21s must be positive and at most half the ack wait 30s"},
		{"ack wait", Config{Conn: nc, Runner: r, Topology: TopologyConfig{AckWait: time.Millisecond}}, "ack wait must be at least 1s"},
		{"backoff", Config{Conn: nc, Runner: r, Topology: TopologyConfig{MaxDeliver: 1, BackOff: []time.Duration{time.Second, time.Minute}}},
			"2 backoff steps exceed max deliver 1"},
		{"worker id", Config{Conn: nc, Runner: r, WorkerID: "a b"}, `worker id "a b"`},
		{"replicas", Config{Conn: nc, Runner: r, Topology: TopologyConfig{Replicas: 7}}, "replicas must be 1..5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewWorker(tt.cfg)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// Errors that are not conflicts keep their cause and are not reported as
// ErrTopology: a server without JetStream, a deadline that passed.
func TestTopologyErrorsKeepTheirCause(t *testing.T) {
	t.Parallel()
	noJS := natstest.Options(t.TempDir())
	noJS.JetStream = false
	plain := natstest.Connect(t, natstest.StartWith(t, noJS))
	withJS := natstest.Connect(t, startServer(t))
	expired := func(t testing.TB) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), -time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	tests := []struct {
		name string
		nc   *nats.Conn
		// ctx is made in the subtest, after t.Parallel: a parallel subtest
		// waits for a free slot after its parent returns (behind the
		// package's other parallel tests, for many seconds under load), and
		// a deadline started before that wait could pass before the first
		// request is sent.
		ctx  func(testing.TB) context.Context
		want error
	}{
		{"no JetStream on the server", plain, natstest.Context, nats.ErrNoResponders},
		{"deadline passed", withJS, expired, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			js, err := jetstream.New(tt.nc)
			if err != nil {
				t.Fatal(err)
			}
			_, err = EnsureTopology(tt.ctx(t), js, TopologyConfig{}, t.Logf)
			if !errors.Is(err, tt.want) || errors.Is(err, ErrTopology) {
				t.Errorf("err = %v; want %v and not ErrTopology", err, tt.want)
			}
		})
	}
}

// askExisting takes "not found" about a stream known to exist for a passing
// answer and asks again; other errors end it at once, and a context that
// ends keeps the last not found as the cause.
func TestAskExisting(t *testing.T) {
	t.Parallel()
	notFound := &jetstream.APIError{Code: 404, ErrorCode: jetstream.JSErrCodeStreamNotFound, Description: "stream not found"}
	calls := 0
	v, err := askExisting(natstest.Context(t), func(context.Context) (int, error) {
		if calls++; calls < 3 {
			return 0, notFound
		}
		return 7, nil
	})
	if v != 7 || err != nil || calls != 3 {
		t.Errorf("got %d, %v after %d calls; want 7 after 3", v, err, calls)
	}

	calls = 0
	refused := errors.New("refused")
	if _, err := askExisting(natstest.Context(t), func(context.Context) (int, error) { calls++; return 0, refused }); !errors.Is(err, refused) || calls != 1 {
		t.Errorf("got %v after %d calls; want refused after 1", err, calls)
	}

	ctx, cancel := context.WithCancel(natstest.Context(t))
	calls = 0
	_, err = askExisting(ctx, func(context.Context) (int, error) {
		if calls++; calls == 2 {
			cancel()
		}
		return 0, notFound
	})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("got %v; want the cancellation and the last not found", err)
	}
}
