package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/natstest"
)

// restartable is a JetStream server that can be stopped and started again
// on the same port and store.
type restartable struct {
	t    *testing.T
	opts *server.Options
	mu   sync.Mutex
	s    *server.Server
}

func startRestartable(t *testing.T) *restartable {
	t.Helper()
	r := &restartable{t: t, opts: natstest.Options(t.TempDir())}
	r.start()
	r.opts.Port = r.s.Addr().(*net.TCPAddr).Port
	t.Cleanup(r.stop)
	return r
}

func (r *restartable) start() {
	r.t.Helper()
	s, err := server.NewServer(r.opts)
	if err != nil {
		r.t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(waitTimeout) {
		r.t.Fatal("server not ready")
	}
	r.mu.Lock()
	r.s = s
	r.mu.Unlock()
}

func (r *restartable) stop() {
	r.mu.Lock()
	s := r.s
	r.mu.Unlock()
	s.Shutdown()
	s.WaitForShutdown()
}

// outageRunner emits before events, waits for outage, emits during events
// (noting which Emit refused), waits for back, and succeeds.
type outageRunner struct {
	before, during  int
	emitted, outage chan struct{}
	back            chan struct{}
	mu              sync.Mutex
	refused         []error
}

func (r *outageRunner) Run(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
	for i := range r.before {
		if err := env.Emit(ctx, "note", 1, map[string]int{"n": i}); err != nil {
			return nil, err
		}
	}
	r.emitted <- struct{}{}
	<-r.outage
	for i := range r.during {
		if err := env.Emit(ctx, "note", 2, map[string]int{"n": i}); err != nil {
			r.mu.Lock()
			r.refused = append(r.refused, err)
			r.mu.Unlock()
		}
	}
	r.emitted <- struct{}{}
	<-r.back
	msgs := []llm.Message{{Role: llm.RoleUser, Content: job.Task}, {Role: llm.RoleAssistant, Content: "done"}}
	return &Outcome{Result: agentloop.Result{Answer: "done", Messages: msgs, Rounds: 1, StopReason: "final_answer", Mode: "full"}, Model: "test"}, nil
}

// outageJob runs one job of r through a server stopped while the runner
// emits its during events and started again before it returns; it returns
// the job's stored events, in stream order, and the final state.
func outageJob(t *testing.T, r *outageRunner, backlog backlogLimits) ([]Event, *State) {
	t.Helper()
	srv := startRestartable(t)
	down := make(chan struct{}, 1)
	reconnect := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(20 * time.Millisecond)}
	nc := natstest.Connect(t, srv.s, append(reconnect, nats.DisconnectErrHandler(func(*nats.Conn, error) {
		select {
		case down <- struct{}{}:
		default:
		}
	}))...)
	cnc := natstest.Connect(t, srv.s, reconnect...)
	r.emitted, r.outage, r.back = make(chan struct{}, 2), make(chan struct{}), make(chan struct{})
	// A long ack wait: the outage must not fence the attempt.
	startWorkerWith(t, nc, Config{Runner: r, Topology: TopologyConfig{AckWait: 20 * time.Second, MaxDeliver: 3}},
		func(w *Worker) { w.backlog = backlog })
	c := newClient(t, cnc)
	ctx := natstest.Context(t)
	if _, err := c.Submit(ctx, &Job{ID: "out", Task: "x"}); err != nil {
		t.Fatal(err)
	}
	<-r.emitted
	// The events so far are stored (so acknowledged, or about to be).
	for len(streamMsgs(t, cnc, c.names.EventsStream(), c.names.EventSubject("out", ">"))) < r.before+1 {
		if ctx.Err() != nil {
			t.Fatal("the events before the outage were not stored")
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.stop()
	select { // the worker knows NATS is away: its publishes are buffered
	case <-down:
	case <-ctx.Done():
		t.Fatal("the worker did not see the server go")
	}
	close(r.outage)
	<-r.emitted
	srv.start()
	// JetStream is back when the state bucket answers.
	for {
		if _, err := c.Status(ctx, "out"); err == nil || errors.Is(err, ErrNotFound) {
			break
		} else if ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(r.back)
	st := waitStatus(t, c, "out")
	watchEvents(t, c, "out") // the terminal event follows the state
	var evs []Event
	for _, m := range streamMsgs(t, cnc, c.names.EventsStream(), c.names.EventSubject("out", ">")) {
		var ev Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if got, want := m.Header.Get(nats.MsgIdHdr), fmt.Sprintf("out.%d.%d", ev.Attempt, ev.Seq); got != want {
			t.Errorf("event %d: Nats-Msg-Id %q, want %q", ev.Seq, got, want)
		}
		evs = append(evs, ev)
	}
	return evs, st
}

func seqs(evs []Event) []int {
	var out []int
	for _, ev := range evs {
		out = append(out, ev.Seq)
	}
	return out
}

// TestEventsSurviveAnOutage: events emitted while NATS is away are kept
// and stored once it is back, each once and in order, before the final
// state (#9 point 4).
func TestEventsSurviveAnOutage(t *testing.T) {
	t.Parallel()
	r := &outageRunner{before: 3, during: 4}
	evs, st := outageJob(t, r, backlogLimits{})
	if st.Status != StatusSucceeded {
		t.Fatalf("state %+v", st)
	}
	if len(r.refused) > 0 {
		t.Errorf("refused: %v", r.refused)
	}
	// started, 3 before, 4 during, succeeded.
	if got, want := seqs(evs), []int{1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(got, want) {
		t.Errorf("stored seqs %v, want %v", got, want)
	}
	if evs[len(evs)-1].Type != EventSucceeded {
		t.Errorf("last event %s", evs[len(evs)-1].Type)
	}
}

// TestEventBacklogGap: events beyond the backlog while NATS is away are
// refused (Emit's error) and an events.gap event names them once the
// backlog has room: lost, never silently.
func TestEventBacklogGap(t *testing.T) {
	t.Parallel()
	r := &outageRunner{before: 2, during: 5}
	// The backlog holds 3 events: those of the outage's first 3 Emits.
	evs, st := outageJob(t, r, backlogLimits{events: 3, bytes: 1 << 20})
	if st.Status != StatusSucceeded {
		t.Fatalf("state %+v", st)
	}
	if len(r.refused) != 2 || !errors.Is(r.refused[0], errBacklogFull) || !strings.Contains(r.refused[0].Error(), "seq 7") {
		t.Fatalf("refused %v, want seq 7 and 8", r.refused)
	}
	// started (1), before (2-3), during (4-6 kept, 7-8 lost), gap (9), succeeded (10).
	if got, want := seqs(evs), []int{1, 2, 3, 4, 5, 6, 9, 10}; !slices.Equal(got, want) {
		t.Fatalf("stored seqs %v, want %v", got, want)
	}
	gap := evs[6]
	var d struct{ FirstSeq, LastSeq, Lost int }
	if err := json.Unmarshal(gap.Data, &struct {
		F *int `json:"first_seq"`
		L *int `json:"last_seq"`
		N *int `json:"lost"`
	}{&d.FirstSeq, &d.LastSeq, &d.Lost}); err != nil {
		t.Fatal(err)
	}
	if gap.Type != EventGap || d.FirstSeq != 7 || d.LastSeq != 8 || d.Lost != 2 {
		t.Errorf("gap event %s %s", gap.Type, gap.Data)
	}
}
