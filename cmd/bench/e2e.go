package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/agentrun"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// E2ERow is one end-to-end measurement.
type E2ERow struct {
	Workers       int     `json:"workers"`
	Concurrency   int     `json:"concurrency"`
	ModelLatency  string  `json:"model_latency"`
	Jobs          int     `json:"jobs"`
	Failed        int     `json:"failed"`
	JobsPerSec    float64 `json:"jobs_per_s"`
	P50ms         float64 `json:"p50_ms"`
	P99ms         float64 `json:"p99_ms"`
	InMsgsPerJob  float64 `json:"nats_in_msgs_per_job"`
	OutMsgsPerJob float64 `json:"nats_out_msgs_per_job"`
	// WorkerSentPerJob and WorkerGotPerJob are the messages the workers'
	// own connections sent to the server and got from it (server.Connz),
	// per job: the worker's share of the two above.
	WorkerSentPerJob float64 `json:"worker_sent_msgs_per_job"`
	WorkerGotPerJob  float64 `json:"worker_got_msgs_per_job"`
	// CPUMsPerJob is the CPU time (user + system) of this whole process
	// and its MCP server children over the timed jobs, divided by them.
	CPUMsPerJob float64 `json:"cpu_ms_per_job"`
	// ViewTools is the tools in the pool's registry (the job's view).
	ViewTools int `json:"view_tools"`
	// ToolMode is the jobs' tool_mode ("" for the default, auto).
	ToolMode string `json:"tool_mode,omitempty"`
	// SeenMode is the mode the model saw (the tools array of a job's first
	// request): full, deferred or search.
	SeenMode string `json:"seen_mode"`
	// LittleBound is C / (2 × model latency), jobs/s (model-latency rows).
	LittleBound float64 `json:"littles_law_bound_jobs_per_s,omitempty"`
	// NetRTTms is the measured round trip of the workers' connection
	// (nats.Conn.RTT through the delay proxy; TCP rows only).
	NetRTTms float64 `json:"net_rtt_ms,omitempty"`
	// CycleP50ms is the median time from one job's submission to the
	// next's (one job in flight only).
	CycleP50ms float64 `json:"cycle_p50_ms,omitempty"`
	// Mem is set on the memory row only.
	Mem *MemRow `json:"memory,omitempty"`
}

type e2eSetup struct {
	dir, mcp            string
	workers, conc, jobs int
	delay               time.Duration
	// hold > 0 measures memory instead: hold jobs held at their first
	// model request at once (conc must be hold).
	hold int
	// catalog adds in-process servers holding these tools to every pool.
	catalog []catalogSet
	// mode is the jobs' tool_mode; search makes the model call
	// search_tools, then call_tool (three model requests per job).
	mode   string
	search bool
	// tcp makes the workers connect over TCP (the embedded server listens
	// on a loopback port) instead of in process; netDelay > 0 puts a
	// delayProxy of that one-way delay between them and the server.
	tcp      bool
	netDelay time.Duration
}

// reqsPerJob is the model requests one job takes.
func (su e2eSetup) reqsPerJob() int {
	if su.search {
		return 3
	}
	return 2
}

// scripted is the model's script. A job's first request is answered
// with a call of the example server's "add": directly when the tool is
// offered, through call_tool otherwise (search mode). With search set, the
// first request is answered with search_tools (restricted to the example
// server) and the second with call_tool of the add the search found. The
// request that carries add's result is answered with the answer.
type scripted struct {
	delay   time.Duration
	gate    atomic.Pointer[chan struct{}]
	search  bool
	addName atomic.Pointer[string] // add's model-facing name
	missed  atomic.Int64           // searches whose result lacked add
	mode    atomic.Pointer[string] // the tool mode a job's first request showed
}

// seenMode names the tool mode of a first request's tools array.
func seenMode(tools []llm.Tool, add string) string {
	for _, t := range tools {
		switch {
		case t.Name == agentloop.ToolSearchTools:
			return string(agentloop.ModeSearch)
		case t.Name == add && string(t.Parameters) == `{"type":"object"}`:
			return string(agentloop.ModeDeferred)
		case t.Name == add:
			return string(agentloop.ModeFull)
		}
	}
	return "?"
}

func (s *scripted) reply(req llmtest.RecordedRequest) llmtest.Reply {
	var block <-chan struct{}
	if ch := s.gate.Load(); ch != nil {
		block = *ch
	}
	if s.delay > 0 {
		t := time.NewTimer(s.delay)
		<-t.C
	}
	add := "add"
	if p := s.addName.Load(); p != nil {
		add = *p
	}
	toolMsgs := 0
	for _, m := range req.Messages {
		if m.Role == llm.RoleTool {
			toolMsgs++
		}
	}
	call := func(name, args string) llmtest.Reply {
		return llmtest.Reply{ToolCalls: []llm.ToolCall{{Function: llm.FunctionCall{Name: name, Arguments: args}}}, Block: block}
	}
	viaCallTool := call(agentloop.ToolCallTool, `{"name":"`+add+`","arguments":{"a":1,"b":2}}`)
	if toolMsgs == 0 {
		m := seenMode(req.Tools, add)
		s.mode.Store(&m)
	}
	if s.search {
		switch toolMsgs {
		case 0:
			return call(agentloop.ToolSearchTools, `{"query":"add two numbers","server":"example"}`)
		case 1:
			if !strings.Contains(req.Messages[len(req.Messages)-1].Content, `"`+add+`"`) {
				s.missed.Add(1)
			}
			return viaCallTool
		}
		return llmtest.Reply{Content: "3", Block: block}
	}
	if toolMsgs > 0 {
		return llmtest.Reply{Content: "3", Block: block}
	}
	for _, t := range req.Tools {
		if t.Name == add {
			return call(add, `{"a":1,"b":2}`)
		}
	}
	return viaCallTool
}

// benchWorker is one worker as a worker process has it: its own
// connection, pool (its own mcpserver process) and model client.
type benchWorker struct {
	w    *jobs.Worker
	pool *toolcache.Pool
}

// startWorker makes worker i of su on nc, its runner wrapped by wrap (nil:
// as it is); stops gets what undoes it. The worker runs from start.
func startWorker(ctx context.Context, nc *nats.Conn, su e2eSetup, modelURL string, i int,
	wrap func(jobs.Runner) jobs.Runner, stops *[]func() error) (*benchWorker, error) {
	quiet := slog.New(slog.DiscardHandler)
	pool, err := toolcache.NewPool(ctx, toolcache.Config{Servers: map[string]toolcache.ServerConfig{
		"example": {Command: su.mcp},
	}}, append(inProcessServers(su.catalog), toolcache.WithLogger(quiet))...)
	if err != nil {
		return nil, err
	}
	*stops = append(*stops, pool.Close)
	mc, err := llm.New(llm.Config{BaseURL: modelURL, APIKey: "scripted", Model: "scripted"})
	if err != nil {
		return nil, err
	}
	loop, err := agentloop.New(agentloop.Config{LLM: mc})
	if err != nil {
		return nil, err
	}
	var runner jobs.Runner
	runner, err = agentrun.New(agentrun.Config{Loop: loop, Pool: pool, Model: "scripted", Logger: quiet})
	if err != nil {
		return nil, err
	}
	if wrap != nil {
		runner = wrap(runner)
	}
	w, err := jobs.NewWorker(jobs.Config{Conn: nc, Runner: runner, Concurrency: su.conc,
		KnownServer: pool.HasServer, Admit: agentrun.Admit, FetchWait: 250 * time.Millisecond,
		WorkerID: fmt.Sprintf("bench-%d", i), ShutdownGrace: 5 * time.Second, Logger: quiet})
	if err != nil {
		return nil, err
	}
	return &benchWorker{w: w, pool: pool}, nil
}

// start runs the worker until stops are called and waits until it is ready.
func (bw *benchWorker) start(ctx context.Context, stops *[]func() error) error {
	wctx, wcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- bw.w.Run(wctx) }()
	*stops = append(*stops, func() error { wcancel(); return <-done })
	select {
	case <-bw.w.Ready():
		return nil
	case err := <-done:
		return fmt.Errorf("worker %s: %w", bw.w.ID(), err)
	case <-time.After(30 * time.Second):
		return fmt.Errorf("worker %s not ready after 30s", bw.w.ID())
	}
}

// findAdd notes the model-facing name of the example server's add.
func (s *scripted) findAdd(pool *toolcache.Pool) error {
	for _, t := range pool.Registry().List() {
		if t.Server == "example" && t.Original == "add" {
			s.addName.Store(&t.Name)
			return nil
		}
	}
	return errors.New(`the pool lists no "add" of the example server`)
}

func measureE2E(ctx context.Context, su e2eSetup) (_ *E2ERow, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ec := jobs.EmbeddedConfig{DataDir: su.dir}
	if su.tcp {
		ec.Listen = "127.0.0.1:0"
	}
	sc := &scripted{delay: su.delay, search: su.search}
	ns, err := jobs.StartEmbedded(ec)
	if err != nil {
		return nil, err
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	model, err := llmtest.Start(llmtest.Script{Handler: sc.reply})
	if err != nil {
		return nil, err
	}
	defer model.Close()

	// The workers, each with its own connection, pool (its own mcpserver
	// process) and model client, as separate worker processes would have.
	var stops []func() error
	var viewTools int
	var rtt time.Duration
	defer func() {
		for _, stop := range slices.Backward(stops) {
			err = errors.Join(err, stop())
		}
	}()
	for i := range su.workers {
		name := fmt.Sprintf("bench-worker-%d", i)
		var nc *nats.Conn
		if su.tcp {
			nc, rtt, err = dialWorker(ns, su.netDelay, name, &stops)
		} else {
			nc, err = jobs.ConnectEmbedded(ns, ec, name)
		}
		if err != nil {
			return nil, err
		}
		stops = append(stops, func() error { nc.Close(); return nil })
		bw, err := startWorker(ctx, nc, su, model.URL(), i, nil, &stops)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			viewTools = bw.pool.Registry().Count()
			if err := sc.findAdd(bw.pool); err != nil {
				return nil, err
			}
		}
		if err := bw.start(ctx, &stops); err != nil {
			return nil, err
		}
	}

	// The submitter: its own connection, one watch of all states.
	nc, err := jobs.ConnectEmbedded(ns, ec, "bench-submitter")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	client, err := jobs.NewClient(ctx, nc, jobs.ClientConfig{})
	if err != nil {
		return nil, err
	}
	finished, err := watchFinished(ctx, nc, client.Names())
	if err != nil {
		return nil, err
	}

	var submitted []time.Time // of the last run's jobs
	run := func(prefix string, n int) ([]time.Duration, int, error) {
		var next atomic.Int64
		lat := make([]time.Duration, n)
		submitted = make([]time.Time, n)
		var failed atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, su.conc)
		for range min(su.conc, n) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= n {
						return
					}
					id := fmt.Sprintf("%s-%d", prefix, i)
					ch := finished.expect(id)
					t0 := time.Now()
					submitted[i] = t0
					if _, err := client.Submit(ctx, &jobs.Job{ID: id, Task: "What is 1 + 2?", ToolMode: su.mode}); err != nil {
						errs <- fmt.Errorf("submit %s: %w", id, err)
						return
					}
					select {
					case st := <-ch:
						lat[i] = time.Since(t0)
						if st != jobs.StatusSucceeded {
							failed.Add(1)
						}
					case <-time.After(2 * time.Minute):
						errs <- fmt.Errorf("job %s not finished after 2 minutes", id)
						return
					case <-ctx.Done():
						errs <- ctx.Err()
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		return lat, int(failed.Load()), <-errs
	}

	// Warm-up: connections, the pool's session, JIT-free but cache-warm.
	warm := max(2*su.workers, min(su.conc, 32))
	if _, _, err := run("warm", warm); err != nil {
		return nil, err
	}
	if su.hold > 0 {
		r, err := measureHeld(ctx, su, model, &sc.gate, run, warm)
		if r != nil {
			r.ViewTools, r.ToolMode, r.SeenMode = viewTools, su.mode, *sc.mode.Load()
		}
		return r, err
	}
	before, err := ns.Varz(nil)
	if err != nil {
		return nil, err
	}
	in0, out0 := before.InMsgs, before.OutMsgs
	wsent0, wgot0, err := workerMsgs(ns)
	if err != nil {
		return nil, err
	}
	cpu0 := cpuTime()
	start := time.Now()
	lat, failed, err := run("job", su.jobs)
	if err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	after, err := ns.Varz(nil)
	if err != nil {
		return nil, err
	}
	wsent, wgot, err := workerMsgs(ns)
	if err != nil {
		return nil, err
	}
	// Every job, warm-up included, took its two (three) model requests.
	if got, want := len(model.Requests()), su.reqsPerJob()*(warm+su.jobs); got != want {
		return nil, fmt.Errorf("the model saw %d requests, want %d per job (%d)", got, su.reqsPerJob(), want)
	}
	if n := sc.missed.Load(); n > 0 {
		return nil, fmt.Errorf("%d searches did not find the example server's add", n)
	}
	slices.Sort(lat)
	var cycle time.Duration
	if su.conc == 1 && len(submitted) > 1 {
		// One job in flight: a job's cycle is from its submission to the
		// next's, which follows its terminal state.
		gaps := make([]time.Duration, len(submitted)-1)
		for i := range gaps {
			gaps[i] = submitted[i+1].Sub(submitted[i])
		}
		slices.Sort(gaps)
		cycle = quantile(gaps, 0.5)
	}
	n := float64(su.jobs)
	r := &E2ERow{Workers: su.workers, Concurrency: su.conc, ModelLatency: su.delay.String(), Jobs: su.jobs,
		Failed: failed, JobsPerSec: n / elapsed.Seconds(),
		P50ms: ms(quantile(lat, 0.50)), P99ms: ms(quantile(lat, 0.99)),
		InMsgsPerJob: float64(after.InMsgs-in0) / n, OutMsgsPerJob: float64(after.OutMsgs-out0) / n,
		WorkerSentPerJob: float64(wsent-wsent0) / n, WorkerGotPerJob: float64(wgot-wgot0) / n,
		CPUMsPerJob: 1000 * cpu / n, ViewTools: viewTools, ToolMode: su.mode, SeenMode: *sc.mode.Load(),
		NetRTTms: ms(rtt), CycleP50ms: ms(cycle)}
	if su.delay > 0 {
		r.LittleBound = float64(su.conc) / (2 * su.delay.Seconds())
	}
	return r, nil
}

// dialWorker connects a worker to ns over TCP, through a delayProxy when
// delay > 0, and returns the connection's measured round trip (the median
// of nine).
func dialWorker(ns *server.Server, delay time.Duration, name string, stops *[]func() error) (*nats.Conn, time.Duration, error) {
	url := ns.ClientURL()
	if delay > 0 {
		p, err := startProxy(ns.Addr().String(), delay)
		if err != nil {
			return nil, 0, err
		}
		*stops = append(*stops, p.Close)
		url = p.URL()
	}
	nc, err := nats.Connect(url, nats.Name(name))
	if err != nil {
		return nil, 0, err
	}
	var rtts []time.Duration
	for range 9 {
		d, err := nc.RTT()
		if err != nil {
			nc.Close()
			return nil, 0, err
		}
		rtts = append(rtts, d)
	}
	slices.Sort(rtts)
	return nc, rtts[len(rtts)/2], nil
}

// workerMsgs sums the messages the workers' connections (named
// bench-worker-*) sent to the server and got from it so far.
func workerMsgs(ns *server.Server) (sent, got int64, err error) {
	cz, err := ns.Connz(&server.ConnzOptions{Limit: 1 << 16})
	if err != nil {
		return 0, 0, err
	}
	for _, c := range cz.Conns {
		if strings.HasPrefix(c.Name, "bench-worker") {
			sent, got = sent+c.InMsgs, got+c.OutMsgs
		}
	}
	return sent, got, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// finishedWatch hands each expected job's terminal status to its waiter.
type finishedWatch struct {
	mu      sync.Mutex
	waiting map[string]chan jobs.Status
}

func (f *finishedWatch) expect(id string) <-chan jobs.Status {
	ch := make(chan jobs.Status, 1)
	f.mu.Lock()
	f.waiting[id] = ch
	f.mu.Unlock()
	return ch
}

// watchFinished watches every state update of the deployment: one watch
// for all jobs, rather than one per job, so the submitter's own waiting
// costs a few messages per job.
func watchFinished(ctx context.Context, nc *nats.Conn, names jobs.Names) (*finishedWatch, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, names.StateBucket())
	if err != nil {
		return nil, err
	}
	w, err := kv.WatchAll(ctx, jetstream.UpdatesOnly())
	if err != nil {
		return nil, err
	}
	f := &finishedWatch{waiting: map[string]chan jobs.Status{}}
	go func() {
		defer w.Stop() //nolint:errcheck // the watch ends with ctx
		for e := range w.Updates() {
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var st jobs.State
			if json.Unmarshal(e.Value(), &st) != nil || !st.Status.Terminal() {
				continue
			}
			f.mu.Lock()
			ch, ok := f.waiting[st.ID]
			delete(f.waiting, st.ID)
			f.mu.Unlock()
			if ok {
				ch <- st.Status
			}
		}
	}()
	return f, nil
}

// MemRow is the memory of jobs in flight.
type MemRow struct {
	Jobs int `json:"jobs"`
	// HeapKBPerJob is the growth of the live heap (after a GC) with Jobs
	// held at their first model request, divided by Jobs.
	HeapKBPerJob float64 `json:"heap_kb_per_job"`
	// GoroutinesPerJob is the growth in goroutines, divided by Jobs.
	GoroutinesPerJob float64 `json:"goroutines_per_job"`
}

func measureHeld(ctx context.Context, su e2eSetup, model *llmtest.Server, gate *atomic.Pointer[chan struct{}],
	run func(string, int) ([]time.Duration, int, error), warm int) (*E2ERow, error) {
	release := make(chan struct{})
	gate.Store(&release)
	h0, g0 := liveHeap(), runtime.NumGoroutine()
	done := make(chan error, 1)
	go func() {
		_, failed, err := run("held", su.hold)
		if err == nil && failed > 0 {
			err = fmt.Errorf("%d held jobs failed", failed)
		}
		done <- err
	}()
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err := model.WaitRequests(wctx, su.reqsPerJob()*warm+su.hold)
	cancel()
	var h1 uint64
	var g1 int
	if err == nil {
		h1, g1 = liveHeap(), runtime.NumGoroutine()
	}
	close(release)
	gate.Store(nil)
	if err2 := <-done; err == nil {
		err = err2
	}
	if err != nil {
		return nil, err
	}
	n := float64(su.hold)
	return &E2ERow{Workers: su.workers, Concurrency: su.hold, Jobs: su.hold, Mem: &MemRow{Jobs: su.hold,
		HeapKBPerJob: (float64(h1) - float64(h0)) / 1024 / n, GoroutinesPerJob: float64(g1-g0) / n}}, nil
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
