package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/natstest"
)

// childEnv, when set, makes the test binary act as a worker process for
// the crash test (see crash_test.go).
const childEnv = "JETAGENT_JOBS_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChildWorker())
	}
	goleak.VerifyTestMain(m, natstest.GoleakOptions()...)
}

// waitTimeout bounds every wait in these tests (natstest's).
const waitTimeout = natstest.WaitTimeout

// startServer runs the package's own embedded JetStream server on a
// random local port with its store in a temporary directory.
func startServer(tb testing.TB) *server.Server {
	tb.Helper()
	s, err := StartEmbedded(EmbeddedConfig{DataDir: tb.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// testTopology is short on waits so redelivery tests are quick.
func testTopology() TopologyConfig {
	return TopologyConfig{AckWait: 2 * time.Second, MaxDeliver: 3}
}

// startWorker runs a worker until the test ends (or the returned stop).
func startWorker(t *testing.T, nc *nats.Conn, cfg Config) (*Worker, func()) {
	t.Helper()
	return startWorkerWith(t, nc, cfg, nil)
}

// startWorkerWith is startWorker with setup applied to the worker before it
// runs (to set test hooks).
func startWorkerWith(t *testing.T, nc *nats.Conn, cfg Config, setup func(*Worker)) (*Worker, func()) {
	t.Helper()
	cfg.Conn = nc
	if cfg.Topology.AckWait == 0 {
		cfg.Topology = testTopology()
	}
	if cfg.FetchWait == 0 {
		cfg.FetchWait = 200 * time.Millisecond
	}
	if cfg.RetryDelay == 0 {
		cfg.RetryDelay = 20 * time.Millisecond
	}
	if cfg.RequeueDelay == 0 {
		cfg.RequeueDelay = 20 * time.Millisecond
	}
	w, err := NewWorker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(w)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-w.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("worker did not start: %v", err)
	case <-time.After(waitTimeout):
		cancel()
		t.Fatal("worker not ready in time")
	}
	stop := sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	t.Cleanup(stop)
	return w, stop
}

func newClient(t *testing.T, nc *nats.Conn) *Client {
	t.Helper()
	c, err := NewClient(natstest.Context(t), nc, ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitStatus waits until the job's state has a final status (or want).
func waitStatus(t *testing.T, c *Client, id string, want ...Status) *State {
	t.Helper()
	st, err := c.states.wait(natstest.Context(t), id, func(s *State) bool {
		if len(want) == 0 {
			return s.Status.Terminal()
		}
		for _, w := range want {
			if s.Status == w {
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("waiting for %s to reach %v: %v", id, want, err)
	}
	return st
}

// testRunner acts out a job's task: "echo:X" answers X; "gate:G" waits for
// release(G) and answers G; "block" waits for its context; "fail:X" fails
// with X; "retry:X" fails with a Retryable X.
type testRunner struct {
	mu      sync.Mutex
	runs    map[string]int
	cur     int
	peak    int
	gates   map[string]chan struct{}
	started chan string
}

func newTestRunner() *testRunner {
	return &testRunner{runs: map[string]int{}, gates: map[string]chan struct{}{}, started: make(chan string, 1000)}
}

func (r *testRunner) gate(name string) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, ok := r.gates[name]
	if !ok {
		g = make(chan struct{})
		r.gates[name] = g
	}
	return g
}

func (r *testRunner) release(name string) { close(r.gate(name)) }

func (r *testRunner) runCount(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[id]
}

func (r *testRunner) peakConcurrency() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peak
}

// waitStarted returns the ids of the next n jobs to start.
func (r *testRunner) waitStarted(t *testing.T, n int) []string {
	t.Helper()
	var ids []string
	timeout := time.After(waitTimeout)
	for len(ids) < n {
		select {
		case id := <-r.started:
			ids = append(ids, id)
		case <-timeout:
			t.Fatalf("only %d of %d jobs started", len(ids), n)
		}
	}
	return ids
}

func (r *testRunner) Run(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
	r.mu.Lock()
	r.runs[job.ID]++
	r.cur++
	r.peak = max(r.peak, r.cur)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.cur--
		r.mu.Unlock()
	}()
	r.started <- job.ID
	verb, arg, _ := strings.Cut(job.Task, ":")
	switch verb {
	case "block":
		<-ctx.Done()
		return nil, ctx.Err()
	case "gate":
		select {
		case <-r.gate(arg):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case "fail":
		return nil, errors.New(arg)
	case "retry":
		return nil, Retryable(errors.New(arg))
	}
	if err := env.Emit(ctx, "note", 1, map[string]string{"text": arg}); err != nil {
		return nil, err
	}
	msgs := []llm.Message{
		{Role: llm.RoleUser, Content: job.Task},
		{Role: llm.RoleAssistant, Content: arg},
	}
	return &Outcome{
		Result: agentloop.Result{
			Answer: arg, Messages: msgs,
			Rounds: 1, StopReason: "final_answer", Mode: "full",
			Usage: agentloop.Usage{Usage: llm.Usage{PromptTokens: 10, CompletionTokens: 2}},
		},
		Reflected: msgs, Model: "test",
	}, nil
}

// streamMsgs returns the payloads and headers of every message of stream
// on subject (a filter) stored so far.
func streamMsgs(t *testing.T, nc *nats.Conn, stream, subject string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := natstest.Context(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if subject == "" || subjectMatches(subject, m.Subject) {
			out = append(out, m)
		}
	}
	return out
}

func subjectMatches(filter, subj string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subj, ".")
	for i, tok := range f {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || (tok != "*" && tok != s[i]) {
			return false
		}
	}
	return len(f) == len(s)
}

// watchEvents returns a job's events up to its terminal one.
func watchEvents(t *testing.T, c *Client, id string) []Event {
	t.Helper()
	var evs []Event
	if _, err := c.Watch(natstest.Context(t), id, func(ev Event) { evs = append(evs, ev) }); err != nil {
		t.Fatalf("watch %s: %v", id, err)
	}
	return evs
}

// fetchOne takes the consumer's next delivery, as a worker's fetch would,
// failing the test when none comes within waitTimeout.
func fetchOne(t *testing.T, cons jetstream.Consumer) jetstream.Msg {
	t.Helper()
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(waitTimeout))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		return m
	}
	t.Fatalf("no delivery: %v", batch.Error())
	return nil
}

// startTopology starts a server with the jobs topology ensured on it, as a
// worker's Run would create it, for tests that drive a worker's parts
// without running it.
func startTopology(t *testing.T) (*nats.Conn, *Topology) {
	t.Helper()
	nc := natstest.Connect(t, startServer(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	topo, err := EnsureTopology(natstest.Context(t), js, testTopology(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return nc, topo
}

// attemptEventTypes returns the types of the events of job id's attempt,
// in order.
func attemptEventTypes(t *testing.T, nc *nats.Conn, c *Client, id string, attempt int) []string {
	t.Helper()
	var types []string
	for _, m := range streamMsgs(t, nc, c.names.EventsStream(), c.names.EventsFilter(id)) {
		var ev Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Attempt == attempt {
			types = append(types, ev.Type)
		}
	}
	return types
}

// firstAttemptGated is a Runner whose first attempt waits for release
// (or its context) and then, with retry, fails with a retryable error;
// the other attempts answer "done". Each attempt is sent on started
// (buffered by the caller) as it begins.
func firstAttemptGated(release <-chan struct{}, started chan<- int, retry bool) RunnerFunc {
	return func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
		if started != nil {
			started <- env.Attempt()
		}
		if env.Attempt() == 1 {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if retry {
				return nil, Retryable(errors.New("provider overloaded"))
			}
		}
		return &Outcome{Result: agentloop.Result{Answer: "done"}}, nil
	}
}

// editStream changes the config of stream name as an operator's nats
// stream edit would, and returns the config it had.
func editStream(t *testing.T, js jetstream.JetStream, name string, change func(*jetstream.StreamConfig)) jetstream.StreamConfig {
	t.Helper()
	ctx := natstest.Context(t)
	str, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	was := str.CachedInfo().Config
	cfg := was
	change(&cfg)
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	return was
}
