//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"golang.org/x/sys/unix"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/childtest"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/codemode"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/journal"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// The soak's knobs (issue 9 point 8). Unset, the short form runs: 12 jobs
// through a 20 s window of faults, under a minute in all.
const (
	soakJobsEnv     = "JETAGENT_SOAK_JOBS"     // jobs submitted (default 12)
	soakDurationEnv = "JETAGENT_SOAK_DURATION" // window of injected faults (default 20s)
	soakSeedEnv     = "JETAGENT_SOAK_SEED"     // seed of the fault schedule (default: the clock)
)

// TestSoak runs jobs with side-effecting tool calls through two worker
// processes while faults are injected at random: a worker SIGKILLed (and
// a replacement started), the nats-server restarted on its store, the
// counting MCP server killed under its worker, and the model answering
// 500 or 429 to a share of requests. Each job makes three calls —
// write(<job>-1), put(<job>-2) (idempotentHint), write(<job>-3) — then
// answers; the model decides by how many tool results it is shown, so a
// failed call is never retried by the model. The subtests are how the
// calls are made (soakModes): by the model one a round, from one
// execute_code script (code mode, the script in a child process of its
// worker, killed as a fault too), or with the second call a client tool
// the test process answers through clienttools.Serve, as submit does.
//
// Once the window is over, every job must settle. The report: submitted,
// succeeded, failed, dead-lettered, lost (no final state: must be 0),
// completed calls repeated (a write run twice: must be 0), in-flight
// calls re-sent (a put run again: allowed by its annotation), and
// tool.interrupted events. Every job's events must come one attempt at a
// time; every succeeded job's reflected transcript lists the calls that
// ran, in order, once each, under the key each ran with; no child of a
// killed or stopped worker (MCP server, code process) outlives it.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: skipped in -short mode")
	}
	t.Parallel()
	cfg := soakSettings(t)
	// One after another: each has two workers, and the machine may have
	// two cores.
	for _, mode := range soakModes {
		t.Run(mode, func(t *testing.T) {
			cfg := cfg
			cfg.mode = mode
			t.Logf("soak %s: %d jobs, %s of faults, seed %d (replay: %s=%d go test -run TestSoak/%s)",
				mode, cfg.jobs, cfg.window, cfg.seed, soakSeedEnv, cfg.seed, mode)
			newSoak(t, cfg).run()
		})
	}
}

// soakModes are TestSoak's subtests: how a job makes its three calls.
const (
	// soakTools: the model calls write, put, write, one a round (full mode).
	soakTools = "tools"
	// soakCode: the model's one execute_code script calls them (code
	// mode); a fault may kill the script's process.
	soakCode = "code"
	// soakClient: the model calls write, note, write, where note is a
	// client tool of the job, answered by the test process.
	soakClient = "client"
)

var soakModes = []string{soakTools, soakCode, soakClient}

type soakConfig struct {
	mode   string
	jobs   int
	window time.Duration
	seed   uint64
	// modelErrShare is the share of model requests answered 500 or 429
	// while faults are injected.
	modelErrShare float64
}

func soakSettings(t *testing.T) soakConfig {
	t.Helper()
	cfg := soakConfig{jobs: 12, window: 20 * time.Second, seed: uint64(time.Now().UnixNano()), modelErrShare: 0.1}
	if v := os.Getenv(soakJobsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", soakJobsEnv, v)
		}
		cfg.jobs = n
	}
	if v := os.Getenv(soakDurationEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			t.Fatalf("%s=%q: want a duration of at least 1s", soakDurationEnv, v)
		}
		cfg.window = d
	}
	if v := os.Getenv(soakSeedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an unsigned number", soakSeedEnv, v)
		}
		cfg.seed = n
	}
	return cfg
}

// soak is one run: the nats-server, the model, the workers, the jobs.
type soak struct {
	t       *testing.T
	cfg     soakConfig
	ctx     context.Context
	dataDir string
	listen  string // 127.0.0.1:<port>, the same across restarts
	logDir  string
	counter string // the counting MCP server's file
	env     []string

	nsMu sync.Mutex
	ns   *server.Server

	nc     *nats.Conn
	client *jobs.Client
	model  *llmtest.Server

	// Model faults: on while injecting, drawn from their own source so the
	// fault schedule does not depend on how many requests came.
	injecting   atomic.Bool
	modelMu     sync.Mutex
	modelRNG    *rand.Rand
	modelErrors atomic.Int64

	workers  []*soakWorker // the live ones, two
	gone     []*soakWorker // killed or stopped
	nWorkers int           // workers started, for their names

	faults map[string]int

	// The client tool's side (soakClient): each job's Serve, and the runs
	// of its handler as the counter file has them ("note <arg> <key>").
	serving    map[string]string // job id -> its secret, once served
	serveStops []func()
	notesMu    sync.Mutex
	notes      []string

	// seen is, by job, the tool results of each request the model
	// answered with the job's final answer: what the model read, which
	// the raw transcript must hold.
	seenMu sync.Mutex
	seen   map[string][][]string
}

func newSoak(t *testing.T, cfg soakConfig) *soak {
	s := &soak{
		t: t, cfg: cfg, dataDir: t.TempDir(), counter: filepath.Join(t.TempDir(), "calls"),
		modelRNG: rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x5eed)),
		faults:   map[string]int{},
		seen:     map[string][][]string{},
		serving:  map[string]string{},
	}
	// Bounded: the window, the settling, and room for a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), cfg.window+s.settleTimeout()+2*time.Minute)
	t.Cleanup(cancel)
	s.ctx = ctx

	logDir, err := os.MkdirTemp("", "jetagent-soak-")
	if err != nil {
		t.Fatal(err)
	}
	s.logDir = logDir
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("soak: worker logs kept in %s (seed %d)", logDir, cfg.seed)
			return
		}
		_ = os.RemoveAll(logDir)
	})

	ns, err := jobs.StartEmbedded(jobs.EmbeddedConfig{DataDir: s.dataDir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	s.ns = ns
	s.listen = ns.Addr().(*net.TCPAddr).String()
	t.Cleanup(func() {
		s.nsMu.Lock()
		defer s.nsMu.Unlock()
		if s.ns != nil {
			s.ns.Shutdown()
			s.ns.WaitForShutdown()
		}
	})
	nc, err := nats.Connect("nats://"+s.listen, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	s.nc = nc

	s.model = llmtest.NewServer(t)
	s.model.Handle(s.answer)

	mcpCfg := filepath.Join(t.TempDir(), "mcp.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"counter": map[string]any{
		"command": os.Args[0], "args": []string{"-test.run=^$"}, "env": map[string]string{counterEnv: s.counter, counterHoldEnv: "1"},
	}}})
	if err := os.WriteFile(mcpCfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JETAGENT_") && !strings.HasPrefix(kv, "NATS_") && !strings.HasPrefix(kv, "OPENAI_") {
			s.env = append(s.env, kv)
		}
	}
	s.env = append(s.env,
		workerChildEnv+"=1",
		"NATS_URL=nats://"+s.listen,
		"OPENAI_BASE_URL="+s.model.URL(),
		"OPENAI_API_KEY=",
		"JETAGENT_MCP_CONFIG="+mcpCfg,
		// As crashWorkerEnv: a dead worker's job is back within two
		// seconds, a live one heartbeats far more often.
		"JETAGENT_ACK_WAIT=2s",
		"JETAGENT_HEARTBEAT=250ms",
		"JETAGENT_SHUTDOWN_GRACE=5s",
		// Faults cost deliveries (a crash, a hand-back while the live
		// attempt answers): never so many that a job is dead-lettered.
		"JETAGENT_MAX_DELIVER=100",
		"JETAGENT_LOG_LEVEL=debug",
		// Short enough that an answer lost in a NATS restart shows as a
		// failed note call (soakClient checks there is none), long
		// enough for a loaded machine.
		"JETAGENT_CLIENT_TOOL_TIMEOUT=20s",
	)
	if cfg.mode == soakCode {
		s.env = append(s.env, "JETAGENT_TOOL_MODE=code", "JETAGENT_CODE_SANDBOX=process")
	} else {
		s.env = append(s.env, "JETAGENT_TOOL_MODE=full")
	}
	return s
}

// steps are the tools of a job's three calls, in order.
func (s *soak) steps() [3]string {
	if s.cfg.mode == soakClient {
		return [3]string{"write", "note", "write"}
	}
	return [3]string{"write", "put", "write"}
}

// soakScript is the code mode job's script: the three calls, each
// failure caught, so that the script goes on as the model does.
func soakScript(job string) string {
	return fmt.Sprintf(`const out = [];
for (const [tool, arg] of [["write", %q], ["put", %q], ["write", %q]]) {
  try { out.push(await tools[tool]({arg})); } catch (e) { out.push(tool + " " + arg + ": " + e.message); }
}
return out.join("\n");`, job+"-1", job+"-2", job+"-3")
}

// noteSchema is the client tool's input schema (the counter's tools').
var noteSchema = json.RawMessage(`{"type":"object","properties":{"arg":{"type":"string"}},"required":["arg"]}`)

// note is the client tool's handler, on the submitter's side: written
// down with the call's idempotency key, then held as the counter's calls
// are.
func (s *soak) note(ctx context.Context, name string, args json.RawMessage) (string, bool, error) {
	var a struct {
		Arg string `json:"arg"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return "", true, err
	}
	s.notesMu.Lock()
	s.notes = append(s.notes, fmt.Sprintf("%s %s %s", name, a.Arg, journal.KeyFromContext(ctx)))
	s.notesMu.Unlock()
	h := fnv.New32a()
	_, _ = h.Write([]byte(name + " " + a.Arg))
	select {
	case <-time.After(time.Duration(h.Sum32()%400) * time.Millisecond): // the call's own work
	case <-ctx.Done():
		return "", true, ctx.Err()
	}
	return name + " " + a.Arg + " ok", false, nil
}

// settleTimeout bounds waiting for every job once the faults stop.
func (s *soak) settleTimeout() time.Duration {
	return max(2*time.Minute, s.cfg.window/2)
}

// answer is the model: by the number of tool results in the history.
func (s *soak) answer(req llmtest.RecordedRequest) llmtest.Reply {
	var job string
	var read []string
	for _, m := range req.Messages {
		switch m.Role {
		case llm.RoleUser:
			job = m.Content
		case llm.RoleTool:
			read = append(read, m.Content)
		}
	}
	results := len(read)
	s.modelMu.Lock()
	delay := time.Duration(50+s.modelRNG.IntN(350)) * time.Millisecond
	fail := s.modelRNG.Float64() < s.cfg.modelErrShare
	status := []int{500, 429}[s.modelRNG.IntN(2)]
	s.modelMu.Unlock()
	if fail && s.injecting.Load() {
		s.modelErrors.Add(1)
		r := llmtest.Reply{Status: status}
		if status == 429 {
			r.Header = map[string]string{"Retry-After": "1"}
		}
		return r
	}
	// A model takes its time: jobs overlap, and faults find them mid-round.
	ready := make(chan struct{})
	time.AfterFunc(delay, func() { close(ready) })
	if results >= 3 || s.cfg.mode == soakCode && results > 0 {
		s.seenMu.Lock()
		s.seen[job] = append(s.seen[job], read)
		s.seenMu.Unlock()
	}
	if s.cfg.mode == soakCode {
		if results > 0 {
			return llmtest.Reply{Block: ready, Content: "done " + job}
		}
		args, _ := json.Marshal(map[string]string{"code": soakScript(job)})
		return llmtest.Reply{Block: ready, ToolCalls: []llm.ToolCall{{Function: llm.FunctionCall{
			Name: agentloop.ToolExecuteCode, Arguments: string(args)}}}}
	}
	if results < 3 {
		return llmtest.Reply{Block: ready, ToolCalls: []llm.ToolCall{{Function: llm.FunctionCall{
			Name: s.steps()[results], Arguments: fmt.Sprintf(`{"arg":"%s-%d"}`, job, results+1)}}}}
	}
	return llmtest.Reply{Block: ready, Content: "done " + job}
}

// submit submits job id, with its client tool and the Serve answering it
// in soakClient; an error is NATS restarting (the caller tries again).
func (s *soak) submit(ctx context.Context, id string) error {
	job := &jobs.Job{ID: id, Task: id}
	if s.cfg.mode == soakClient {
		// One secret and one Serve per job, kept across tries: a try whose
		// answer was lost may have queued the job with its secret.
		if s.serving[id] == "" {
			secret, err := clienttools.NewSecret()
			if err != nil {
				return err
			}
			// As submit --local-mcp: Serve before the job is published,
			// on the submitter's connection, until the job settles.
			stop, err := clienttools.Serve(s.ctx, s.nc, id, secret, s.note, clienttools.Options{})
			if err != nil {
				return err
			}
			s.serving[id] = secret
			s.serveStops = append(s.serveStops, stop)
		}
		job.ClientSecret = s.serving[id]
		job.ClientTools = []clienttools.Decl{{Name: "note", Description: "Note (a side effect, on the submitter's side).", InputSchema: noteSchema}}
	}
	_, err := s.client.Submit(ctx, job)
	return err
}

func soakJobID(i int) string { return fmt.Sprintf("soak-%04d", i) }

func (s *soak) run() {
	t := s.t
	// The first worker creates the topology; the dead-letterer's consumer
	// is its last piece, so its creation advisory means a client can open it.
	created, err := s.nc.SubscribeSync(server.JSAdvisoryConsumerCreatedPre + ".AGENT_ADVISORIES.>")
	if err != nil {
		t.Fatal(err)
	}
	s.startWorker()
	if _, err := created.NextMsgWithContext(s.ctx); err != nil {
		t.Fatalf("the first worker did not create the topology: %v", err)
	}
	_ = created.Unsubscribe()
	s.startWorker()
	s.client, err = jobs.NewClient(s.ctx, s.nc, jobs.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}

	// Submissions spread over the first 60% of the window, so the faults
	// find jobs at every stage.
	start := time.Now()
	s.injecting.Store(true)
	var submitted []string
	var submitRetries int
	subDone := make(chan struct{})
	go func() {
		defer close(subDone)
		spacing := s.cfg.window * 6 / 10 / time.Duration(s.cfg.jobs)
		for i := range s.cfg.jobs {
			select {
			case <-time.After(time.Until(start.Add(time.Duration(i) * spacing))): // pacing of the workload
			case <-s.ctx.Done():
				return
			}
			id := soakJobID(i)
			for {
				ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
				err := s.submit(ctx, id)
				cancel()
				if err == nil {
					submitted = append(submitted, id)
					break
				}
				submitRetries++
				select {
				case <-time.After(200 * time.Millisecond): // NATS is restarting: try again (Submit is idempotent)
				case <-s.ctx.Done():
					t.Errorf("submit %s: %v", id, err)
					return
				}
			}
		}
	}()

	s.inject(start.Add(s.cfg.window))
	<-subDone
	s.injecting.Store(false)
	s.ensureWorkers()

	states := s.settle(submitted)
	for _, stop := range s.serveStops {
		stop()
	}
	trails := s.trails(submitted)
	s.report(submitted, submitRetries, states, trails)

	for _, w := range append([]*soakWorker(nil), s.workers...) {
		s.stopWorker(w)
	}
	codeChildren := 0
	for _, w := range s.gone {
		codeChildren += w.codeChildren
		w.checkChildrenExit(t)
		if strings.Contains(w.readLog(), "WARNING: DATA RACE") {
			t.Errorf("worker %s reported a data race (log %s)", w.name, w.logPath)
		}
	}
	s.checkNoStrayCodeChildren()
	if s.cfg.mode == soakCode {
		t.Logf("code processes running when their worker was killed or stopped: %d (each had to exit)", codeChildren)
	}
}

// checkNoStrayCodeChildren fails for a code-mode process of this test
// binary whose parent is not one (a worker's, killed before the listing
// of its children saw it: it was reparented). Those of other tests of
// this binary have their test process as parent.
func (s *soak) checkNoStrayCodeChildren() {
	self, err := os.Readlink("/proc/self/exe")
	if err != nil {
		s.t.Fatal(err)
	}
	for _, pid := range codeProcesses(s.t, self) {
		if pp := childtest.ParentPID(pid); pp != 0 {
			if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pp)); exe == self {
				continue
			}
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone
		}
		if !childtest.Exited(fd, 10*time.Second) {
			s.t.Errorf("code process %d of a gone worker still runs, parent now %d", pid, childtest.ParentPID(pid))
		}
		_ = unix.Close(fd)
	}
}

// codeProcesses lists the running code-mode children (codemode.ChildEnv
// set) of the binary exe.
func codeProcesses(t *testing.T, exe string) []int {
	t.Helper()
	return childtest.Processes(t, func(pid int) bool {
		x, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		return x == exe && isCodeProcess(pid)
	})
}

// isCodeProcess reports whether pid is a code-mode child (its whole
// environment is codemode's: the marker among it).
func isCodeProcess(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		if kv == codemode.ChildEnv+"=1" {
			return true
		}
	}
	return false
}

// inject draws faults until the deadline, one at a time, at random
// intervals of 0.7–3 s.
func (s *soak) inject(until time.Time) {
	rng := rand.New(rand.NewPCG(s.cfg.seed, s.cfg.seed^0xfa17))
	for {
		next := time.Duration(700+rng.IntN(2300)) * time.Millisecond
		if time.Now().Add(next).After(until) {
			return
		}
		select {
		case <-time.After(next): // the pacing of faults: the point of a soak
		case <-s.ctx.Done():
			return
		}
		s.ensureWorkers()
		w := s.workers[rng.IntN(len(s.workers))]
		kinds := 3
		if s.cfg.mode == soakCode {
			kinds = 4 // and the code's process killed
			// A script runs for a second at most: a worker running one,
			// when one does, so that a kill finds one more often.
			for _, x := range s.workers {
				if slices.ContainsFunc(childtest.Children(s.t, x.cmd.Process.Pid), isCodeProcess) {
					w = x
					break
				}
			}
		}
		switch rng.IntN(kinds) {
		case 0:
			s.faults["worker kill"]++
			s.killWorker(w)
			s.startWorker()
		case 1:
			s.faults["NATS restart"]++
			s.restartNATS(time.Duration(100+rng.IntN(1900)) * time.Millisecond)
		case 2:
			var pids []int
			for _, pid := range childtest.Children(s.t, w.cmd.Process.Pid) {
				if !isCodeProcess(pid) {
					pids = append(pids, pid)
				}
			}
			if len(pids) == 0 {
				s.faults["MCP kill (none running)"]++
				continue
			}
			s.faults["MCP server kill"]++
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		case 3:
			var pids []int
			for _, pid := range childtest.Children(s.t, w.cmd.Process.Pid) {
				if isCodeProcess(pid) {
					pids = append(pids, pid)
				}
			}
			if len(pids) == 0 {
				s.faults["code process kill (none running)"]++
				continue
			}
			s.faults["code process kill"]++
			_ = syscall.Kill(pids[rng.IntN(len(pids))], syscall.SIGKILL)
		}
	}
}

// restartNATS stops the server, leaves it down for outage, and starts it
// again on the same store and port; the workers reconnect by themselves.
func (s *soak) restartNATS(outage time.Duration) {
	s.nsMu.Lock()
	defer s.nsMu.Unlock()
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	s.ns = nil
	select {
	case <-time.After(outage): // the outage itself
	case <-s.ctx.Done():
	}
	ns, err := jobs.StartEmbedded(jobs.EmbeddedConfig{DataDir: s.dataDir, Listen: s.listen})
	if err != nil {
		s.t.Fatalf("restart NATS on %s: %v", s.listen, err)
	}
	s.ns = ns
}

// ensureWorkers replaces a worker that exited on its own (a finding: no
// fault but SIGKILL should end one) so two keep running.
func (s *soak) ensureWorkers() {
	live := s.workers[:0]
	for _, w := range s.workers {
		select {
		case <-w.done:
			s.t.Errorf("worker %s exited on its own: %v (log %s)", w.name, w.err, w.logPath)
			s.gone = append(s.gone, w)
		default:
			live = append(live, w)
		}
	}
	s.workers = live
	for len(s.workers) < 2 {
		s.startWorker()
	}
}

// settle waits for every job's final state. A job still without one when
// the bound runs out is lost.
func (s *soak) settle(ids []string) map[string]*jobs.State {
	ctx, cancel := context.WithTimeout(s.ctx, s.settleTimeout())
	defer cancel()
	var mu sync.Mutex
	states := map[string]*jobs.State{}
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			st, err := s.client.Wait(ctx, id)
			if err != nil {
				return
			}
			mu.Lock()
			states[id] = st
			mu.Unlock()
		})
	}
	wg.Wait()
	return states
}

// soakTrail is what a job's events say.
type soakTrail struct {
	interrupted, resumed int
	// outOfOrder: an event of an attempt after one of a later attempt.
	outOfOrder []string
	events     []string
}

// trails reads every job's events (eight jobs at a time).
func (s *soak) trails(ids []string) map[string]*soakTrail {
	var mu sync.Mutex
	out := map[string]*soakTrail{}
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
			defer cancel()
			tr := &soakTrail{}
			latest := 0
			_, err := s.client.Watch(ctx, id, func(ev jobs.Event) {
				tr.events = append(tr.events, fmt.Sprintf("%s@%d/r%d/%s", ev.Type, ev.Attempt, ev.Round, ev.Worker))
				switch ev.Type {
				case agentloop.EventToolInterrupted:
					tr.interrupted++
				case agentloop.EventJobResumed:
					tr.resumed++
				}
				if ev.Attempt == 0 {
					return // not an attempt's (a client's cancel, the dead-letterer's)
				}
				if ev.Attempt < latest {
					tr.outOfOrder = append(tr.outOfOrder, fmt.Sprintf("%s of attempt %d after attempt %d", ev.Type, ev.Attempt, latest))
				}
				latest = max(latest, ev.Attempt)
			})
			if err != nil {
				tr.events = append(tr.events, "watch: "+err.Error())
			}
			// Every event of every fault matches its schema (point 10).
			checkEventSchemas(s.t, readJobEvents(s.t, ctx, s.nc, id))
			mu.Lock()
			out[id] = tr
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func (s *soak) report(submitted []string, submitRetries int, states map[string]*jobs.State, trails map[string]*soakTrail) {
	t := s.t
	var succeeded, failed, dead, cancelled, lost, interrupted, resumed int
	var problems []string // job ids whose worker logs to show
	for _, id := range submitted {
		st := states[id]
		switch {
		case st == nil:
			lost++
			cur, err := s.client.Status(s.ctx, id)
			if err != nil {
				t.Errorf("lost job %s: no final state (%v)", id, err)
			} else {
				t.Errorf("lost job %s: no final state; state %s, attempt %d, worker %s, updated %s",
					id, cur.Status, cur.Attempt, cur.Worker, cur.UpdatedAt.Format(time.RFC3339Nano))
			}
			problems = append(problems, id)
		case st.Status == jobs.StatusSucceeded:
			succeeded++
		case st.Status == jobs.StatusDead:
			dead++
		case st.Status == jobs.StatusCancelled:
			cancelled++
		default:
			failed++
		}
		if st != nil && st.Status != jobs.StatusSucceeded {
			t.Logf("job %s %s after %d attempts: %s", id, st.Status, st.Attempt, st.Error)
			if st.Error == "" || st.Status == jobs.StatusCancelled {
				t.Errorf("job %s %s without a reason", id, st.Status)
				problems = append(problems, id)
			}
		}
		if tr := trails[id]; tr != nil {
			interrupted += tr.interrupted
			resumed += tr.resumed
			if len(tr.outOfOrder) > 0 {
				t.Errorf("job %s: events of two attempts interleave: %v\n%s", id, tr.outOfOrder, strings.Join(tr.events, " "))
				problems = append(problems, id)
			}
		}
	}

	runs := soakCalls(t, s.counter)
	s.notesMu.Lock()
	for _, l := range s.notes {
		f := strings.SplitN(l, " ", 3)
		runs[f[0]+" "+f[1]] = append(runs[f[0]+" "+f[1]], f[2])
	}
	s.notesMu.Unlock()
	var repeated, resent, writes, puts, notes int
	for call, keys := range runs {
		tool, arg, _ := strings.Cut(call, " ")
		job := arg[:max(0, strings.LastIndexByte(arg, '-'))]
		for _, k := range keys {
			if k != keys[0] || !strings.HasPrefix(k, job+"/") {
				// Another key is another call: the model asked again, or
				// the journal lost the call's intent.
				t.Errorf("%s ran under keys %v, want one key naming job %s", call, keys, job)
				problems = append(problems, job)
				break
			}
		}
		switch tool {
		case "write":
			writes++
			if n := len(keys); n > 1 {
				repeated += n - 1
				t.Errorf("completed call write(%s) ran %d times", arg, n)
				problems = append(problems, job)
			}
		case "put":
			puts++
			resent += len(keys) - 1
		case "note":
			// A client tool is never sent again (it has no hints), and
			// Serve runs a request id once.
			notes++
			if n := len(keys); n > 1 {
				repeated += n - 1
				t.Errorf("client tool call note(%s) ran %d times", arg, n)
				problems = append(problems, job)
			}
		}
	}

	// The reflected transcripts: the calls that ran, once each, in order.
	var complete, noAnswer int
	for _, id := range submitted {
		if st := states[id]; st == nil || st.Status != jobs.StatusSucceeded {
			continue
		}
		all, lostAnswers, ok := s.checkTranscript(id, runs)
		if !ok {
			problems = append(problems, id)
		}
		if all {
			complete++
		}
		noAnswer += lostAnswers
	}
	if noAnswer > 0 {
		// The worker asks again after each reconnection and Serve answers
		// again: no answer is lost in a NATS restart.
		t.Errorf("%d client tool calls went unanswered", noAnswer)
	}

	var faults []string
	for k, n := range s.faults {
		faults = append(faults, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(faults)
	t.Logf("soak seed %d, %d jobs, %s window: submitted %d, succeeded %d, failed %d, dead-lettered %d, lost %d; "+
		"completed calls repeated %d, in-flight calls re-sent %d, interrupted %d, resumed %d; "+
		"distinct writes %d of %d, %ss %d of %d; transcripts with all three calls %d of %d succeeded; "+
		"faults: %s, model errors %d of %d requests; submit retries %d",
		s.cfg.seed, s.cfg.jobs, s.cfg.window, len(submitted), succeeded, failed, dead, lost,
		repeated, resent, interrupted, resumed,
		writes, 2*len(submitted), s.steps()[1], puts+notes, len(submitted), complete, succeeded, strings.Join(faults, ", "),
		s.modelErrors.Load(), len(s.model.Requests()), submitRetries)
	if len(submitted) != s.cfg.jobs {
		t.Errorf("submitted %d of %d jobs", len(submitted), s.cfg.jobs)
	}
	if lost != 0 {
		t.Errorf("lost %d jobs (no final state within %s of the faults' end)", lost, s.settleTimeout())
	}
	if repeated != 0 {
		t.Errorf("%d completed calls repeated", repeated)
	}
	if cancelled != 0 {
		t.Errorf("%d jobs cancelled: nobody cancels in the soak", cancelled)
	}
	if t.Failed() {
		s.showLogs(problems)
	}
}

// checkTranscript checks job id's reflected transcript against the runs
// (soakCalls): its calls of the three tools are the job's steps in order,
// each at most once; each call that ran is there, under the key it ran
// with (the job and the call's id), and each call answered without an
// error ran. all: the three are there; noAnswer: client tool calls that
// got no answer.
func (s *soak) checkTranscript(id string, runs map[string][]string) (all bool, noAnswer int, ok bool) {
	t := s.t
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	b, err := s.client.Transcript(ctx, id, false)
	if err != nil {
		t.Errorf("job %s: reflected transcript: %v", id, err)
		return false, 0, false
	}
	var tr jobs.Transcript
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Errorf("job %s: reflected transcript: %v", id, err)
		return false, 0, false
	}
	before := t.Failed()
	checkCoherent(t, "job "+id+" reflected transcript", tr.Messages)
	ok = t.Failed() == before
	results := map[string]string{}
	for _, m := range tr.Messages {
		if m.Role == llm.RoleTool {
			results[m.ToolCallID] = m.Content
		}
	}
	steps := s.steps()
	listed := map[int]string{} // step -> call id
	last := 0
	var got []string
	for _, m := range tr.Messages {
		for _, c := range m.ToolCalls {
			var a struct {
				Arg string `json:"arg"`
			}
			_ = json.Unmarshal([]byte(c.Function.Arguments), &a)
			got = append(got, c.Function.Name+"("+a.Arg+")")
			if c.Function.Name == agentloop.ToolExecuteCode {
				// Left as it is by reflection only when it made no call:
				// its script ended before the first (its process killed,
				// or not started), which the model read as an error.
				if out := results[c.ID]; !strings.HasPrefix(out, "Error") {
					t.Errorf("job %s: execute_code left in the reflected transcript, though it answered %q", id, out)
					ok = false
				} else {
					t.Logf("job %s: execute_code made no call: %.200s", id, out)
				}
				continue
			}
			n, _ := strconv.Atoi(strings.TrimPrefix(a.Arg, id+"-"))
			if n < 1 || n > 3 || steps[n-1] != c.Function.Name || n <= last {
				ok = false
				continue
			}
			last = n
			listed[n] = c.ID
			out := results[c.ID]
			if strings.Contains(out, clienttools.ErrNoAnswer.Error()) {
				noAnswer++
			}
			if !strings.HasPrefix(out, "Error") && len(runs[c.Function.Name+" "+a.Arg]) == 0 {
				t.Errorf("job %s: the transcript's %s(%s) answered %q, but it never ran", id, c.Function.Name, a.Arg, out)
				ok = false
			}
		}
	}
	if !ok {
		t.Errorf("job %s: reflected calls %v, want %s(%s-1), %s(%s-2), %s(%s-3) in order, each at most once",
			id, got, steps[0], id, steps[1], id, steps[2], id)
	}
	for n, tool := range steps {
		keys := runs[fmt.Sprintf("%s %s-%d", tool, id, n+1)]
		if len(keys) == 0 {
			continue
		}
		callID, in := listed[n+1]
		if !in {
			t.Errorf("job %s: %s(%s-%d) ran but is not in the reflected transcript %v", id, tool, id, n+1, got)
			ok = false
			continue
		}
		if want := id + "/" + callID; keys[0] != want {
			t.Errorf("job %s: %s(%s-%d) ran under key %q, the transcript's call is %q", id, tool, id, n+1, keys[0], want)
			ok = false
		}
	}
	// The raw transcript: the tool results as the model read them.
	raw, err := s.client.Transcript(ctx, id, true)
	if err != nil {
		t.Errorf("job %s: raw transcript: %v", id, err)
		return len(listed) == 3, noAnswer, false
	}
	var rtr jobs.Transcript
	if err := json.Unmarshal(raw, &rtr); err != nil {
		t.Errorf("job %s: raw transcript: %v", id, err)
		return len(listed) == 3, noAnswer, false
	}
	var stored []string
	for _, m := range rtr.Messages {
		if m.Role == llm.RoleTool {
			stored = append(stored, m.Content)
		}
	}
	s.seenMu.Lock()
	seen := s.seen[id]
	s.seenMu.Unlock()
	for _, read := range seen {
		if !slices.Equal(read, stored) {
			t.Errorf("job %s: the raw transcript's tool results\n %q\nare not what the model read before its final answer\n %q", id, stored, read)
			ok = false
			break
		}
	}
	return len(listed) == 3, noAnswer, ok
}

// soakCalls reads the counter file: "<tool> <arg>" -> the idempotency
// key of each run.
func soakCalls(t *testing.T, file string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	runs := map[string][]string{}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		key := ""
		if len(f) > 2 {
			key = f[2]
		}
		runs[f[0]+" "+f[1]] = append(runs[f[0]+" "+f[1]], key)
	}
	return runs
}

// showLogs prints the worker log lines of the jobs with a problem.
func (s *soak) showLogs(ids []string) {
	if len(ids) == 0 {
		return
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		var lines []string
		for _, w := range append(append([]*soakWorker(nil), s.gone...), s.workers...) {
			for _, l := range strings.Split(w.readLog(), "\n") {
				if strings.Contains(l, "job="+id+" ") || strings.HasSuffix(l, "job="+id) {
					lines = append(lines, w.name+": "+l)
				}
			}
		}
		if len(lines) > 120 {
			lines = append(lines[:60], append([]string{"..."}, lines[len(lines)-60:]...)...)
		}
		s.t.Logf("worker log lines of job %s:\n%s", id, strings.Join(lines, "\n"))
	}
}

// soakWorker is a worker process (this test binary run as the worker
// command), its log in a file.
type soakWorker struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	ready   chan struct{} // closed when it logs "worker ready"
	done    chan struct{} // closed when it has exited; err is its exit
	err     error
	// children are its MCP servers and code processes when it was killed
	// or stopped, with pidfds so a reused pid cannot fool us.
	children     map[int]int
	codeChildren int // of children
}

func (s *soak) startWorker() *soakWorker {
	t := s.t
	s.nWorkers++
	w := &soakWorker{
		name: fmt.Sprintf("w%d", s.nWorkers), ready: make(chan struct{}), done: make(chan struct{}),
		children: map[int]int{},
	}
	w.logPath = filepath.Join(s.logDir, w.name+".log")
	f, err := os.Create(w.logPath)
	if err != nil {
		t.Fatal(err)
	}
	w.logFile = f
	w.cmd = exec.Command(os.Args[0], "-test.run=^$")
	w.cmd.Env = append(append([]string(nil), s.env...), "JETAGENT_WORKER_ID="+w.name)
	w.cmd.Stderr = &readyWriter{f: f, ready: w.ready}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		w.err = w.cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		select {
		case <-w.done:
		default:
			_ = w.cmd.Process.Kill()
			<-w.done
		}
		_ = w.logFile.Close()
		for pid, fd := range w.children {
			if !childtest.Exited(fd, 0) {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
			_ = unix.Close(fd)
		}
	})
	// Ready before the next fault: a worker that cannot reach NATS at its
	// start exits, as it should.
	select {
	case <-w.ready:
	case <-w.done:
		t.Fatalf("worker %s exited at its start: %v\n%s", w.name, w.err, w.readLog())
	case <-s.ctx.Done():
		t.Fatalf("worker %s not ready: %v", w.name, s.ctx.Err())
	}
	s.workers = append(s.workers, w)
	return w
}

func (s *soak) removeWorker(w *soakWorker) {
	for i, x := range s.workers {
		if x == w {
			s.workers = append(s.workers[:i], s.workers[i+1:]...)
			break
		}
	}
	s.gone = append(s.gone, w)
}

// killWorker SIGKILLs w: no shutdown code of its runs.
func (s *soak) killWorker(w *soakWorker) {
	w.recordChildren(s.t)
	_ = w.cmd.Process.Kill()
	<-w.done
	s.removeWorker(w)
}

// stopWorker SIGTERMs w and expects a clean exit within its grace.
func (s *soak) stopWorker(w *soakWorker) {
	t := s.t
	w.recordChildren(t)
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
		if w.err != nil {
			t.Errorf("worker %s after SIGTERM: %v", w.name, w.err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("worker %s did not stop within 30s of SIGTERM", w.name)
	}
	s.removeWorker(w)
}

func (w *soakWorker) recordChildren(t *testing.T) {
	for _, pid := range childtest.Children(t, w.cmd.Process.Pid) {
		if _, ok := w.children[pid]; ok {
			continue
		}
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			w.children[pid] = fd
			if isCodeProcess(pid) {
				w.codeChildren++
			}
		}
	}
}

// checkChildrenExit fails for each child of the (gone) worker still
// running a few seconds later.
func (w *soakWorker) checkChildrenExit(t *testing.T) {
	for pid, fd := range w.children {
		if !childtest.Exited(fd, 10*time.Second) {
			t.Errorf("worker %s is gone but its child %d still runs, parent now %d", w.name, pid, childtest.ParentPID(pid))
		}
	}
}

func (w *soakWorker) readLog() string {
	b, _ := os.ReadFile(w.logPath)
	return string(b)
}

// readyWriter writes a worker's stderr to its log file and closes ready
// at the "worker ready" line. Only the process's copying goroutine writes.
type readyWriter struct {
	f     *os.File
	ready chan struct{}
	line  []byte // the line being written, until ready is closed
}

func (r *readyWriter) Write(p []byte) (int, error) {
	if r.ready != nil {
		r.line = append(r.line, p...)
		for {
			i := strings.IndexByte(string(r.line), '\n')
			if i < 0 {
				break
			}
			if strings.Contains(string(r.line[:i]), `msg="worker ready"`) {
				close(r.ready)
				r.ready, r.line = nil, nil
				break
			}
			r.line = r.line[i+1:]
		}
	}
	return r.f.Write(p)
}
