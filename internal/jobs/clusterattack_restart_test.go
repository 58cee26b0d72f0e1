package jobs

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/natstest"
)

// clusterRunner's attempts wait for their job's gate (when it has one),
// then emit an event and answer; it counts the attempts of each job.
type clusterRunner struct {
	mu      sync.Mutex
	runs    map[string][]int
	gates   map[string]chan struct{}
	started chan string
}

func newClusterRunner() *clusterRunner {
	return &clusterRunner{runs: map[string][]int{}, gates: map[string]chan struct{}{}, started: make(chan string, 100)}
}

func (r *clusterRunner) gate(id string) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	g, ok := r.gates[id]
	if !ok {
		g = make(chan struct{})
		r.gates[id] = g
	}
	return g
}

func (r *clusterRunner) Run(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
	r.mu.Lock()
	r.runs[job.ID] = append(r.runs[job.ID], env.Attempt())
	r.mu.Unlock()
	r.started <- job.ID
	if job.Task == "gate" {
		select {
		case <-r.gate(job.ID):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := env.Emit(ctx, "note", 1, map[string]string{"text": "done"}); err != nil {
		return nil, err
	}
	// Messages, so the transcripts are stored as the job settles.
	msgs := []llm.Message{{Role: llm.RoleUser, Content: job.Task}, {Role: llm.RoleAssistant, Content: "done"}}
	return &Outcome{Result: agentloop.Result{Answer: "done " + job.ID, Messages: msgs, Rounds: 1}, Reflected: msgs}, nil
}

func (r *clusterRunner) attempts(id string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.runs[id]...)
}

// connectCluster connects to fc as a worker does (every URL, reconnecting
// for ever), quickly.
func connectCluster(t *testing.T, fc *fixedCluster, name string) *nats.Conn {
	t.Helper()
	nc, err := NATSConfig{URL: fc.urls()}.Connect(name, nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// checkSettledOnce checks that job id succeeded, that its runner ran
// exactly once per attempt the state and events show, and that events of
// two attempts did not interleave.
func checkSettledOnce(t *testing.T, c *Client, r *clusterRunner, id string) {
	t.Helper()
	st := pollStatus(t, c, id)
	if st.Status != StatusSucceeded || st.Result == nil || st.Result.Answer != "done "+id {
		t.Errorf("%s: state %+v", id, st)
		return
	}
	if got := settledEventAttempts(t, c, id); interleaved(got) {
		t.Errorf("%s: events of two attempts interleaved: attempts %v", id, got)
	}
	if a := r.attempts(id); len(a) == 0 || a[len(a)-1] != st.Attempt {
		t.Errorf("%s: attempts run %v, state says attempt %d", id, a, st.Attempt)
	}
}

// TestClusterRestartsMidJob restarts the nodes of an R3 cluster while a
// job runs: the node the worker is connected to, then the whole cluster
// at once (every stream and consumer elects its leader again from the
// stores). The running job settles once, with events of one attempt at a
// time; jobs submitted after each restart run: the worker is not stuck.
func TestClusterRestartsMidJob(t *testing.T) {
	workersNode := func(_ *fixedCluster, n int) []int { return []int{n} }
	all := func(*fixedCluster, int) []int { return []int{0, 1, 2} }
	for _, tc := range []struct {
		name    string
		nodes   func(fc *fixedCluster, workerNode int) []int
		ackWait time.Duration
		// settling: the job's gate opens just before the nodes stop, so
		// its transcripts, events and final state are written while the
		// cluster is away or electing leaders.
		settling bool
	}{
		{"whole cluster", all, 30 * time.Second, false},
		{"whole cluster, longer than the ack wait", all, 3 * time.Second, false},
		{"worker's node while the job settles", workersNode, 6 * time.Second, true},
		{"whole cluster while the job settles", all, 6 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := startFixedCluster(t)
			ncW, ncC := connectCluster(t, fc, "worker"), connectCluster(t, fc, "client")
			r := newClusterRunner()
			topo := TopologyConfig{Replicas: 3, AckWait: tc.ackWait, MaxDeliver: 5}
			startWorker(t, ncW, Config{Runner: r, WorkerID: "w", Concurrency: 2, Topology: topo})
			c := newClient(t, ncC)
			ctx := natstest.Context(t)
			if _, err := c.Submit(ctx, &Job{ID: "long", Task: "gate"}); err != nil {
				t.Fatal(err)
			}
			if id := withinWait(t, "start of the job", r.started); id != "long" {
				t.Fatalf("started %s", id)
			}
			workerNode := -1
			for i, s := range fc.nodes {
				if s.Name() == ncW.ConnectedServerName() {
					workerNode = i
				}
			}
			down := tc.nodes(fc, workerNode)
			if tc.settling {
				close(r.gate("long"))
			}
			for _, i := range down {
				fc.stop(i)
			}
			for _, i := range down {
				fc.start(i)
			}
			pollUntil(t, "meta leader after the restart", func() bool { return oneMetaLeader(fc.nodes) })
			if !tc.settling {
				close(r.gate("long"))
			}
			checkSettledOnce(t, c, r, "long")
			for i := range 3 {
				id := fmt.Sprintf("after%d", i)
				sctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
				_, err := c.Submit(sctx, &Job{ID: id, Task: "echo"})
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				checkSettledOnce(t, c, r, id)
			}
			t.Logf("attempts of the running job: %v", r.attempts("long"))
		})
	}
}
