package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// QueueRow is one worker working through a full queue on a nats-server of
// its own process.
type QueueRow struct {
	Concurrency int     `json:"concurrency"`
	Queued      int     `json:"queued"`
	Failed      int     `json:"failed"`
	JobsPerSec  float64 `json:"jobs_per_s"`
	// BusyMean is the mean number of slots holding a job (the consumer's
	// NumAckPending: delivered and not yet acknowledged), RunningMean that
	// of jobs in the runner (the rest of a slot's time is the claim and
	// the settling), sampled every 10 ms from the first job's start until
	// the last job started (so while jobs were still waiting).
	BusyMean    float64 `json:"busy_slots_mean"`
	RunningMean float64 `json:"running_mean"`
	// CPUMsPerJob is this process (worker, scripted model) and the MCP
	// server; NATSCPUMsPerJob is the nats-server process alone.
	CPUMsPerJob     float64 `json:"cpu_ms_per_job"`
	NATSCPUMsPerJob float64 `json:"nats_cpu_ms_per_job"`
	// WorkerSentPerJob and WorkerGotPerJob: the worker connection's
	// messages to and from the server (its /connz), per job.
	WorkerSentPerJob float64 `json:"worker_sent_msgs_per_job"`
	WorkerGotPerJob  float64 `json:"worker_got_msgs_per_job"`
}

// natsProcess is a nats-server built from the module's own dependency
// (github.com/nats-io/nats-server/v2) and run as a process: JetStream,
// loopback client and monitoring ports.
type natsProcess struct {
	cmd             *exec.Cmd
	url, monitorURL string
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func startNATSProcess(ctx context.Context, dir string) (*natsProcess, error) {
	bin := filepath.Join(dir, "nats-server")
	if _, err := os.Stat(bin); err != nil {
		out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/nats-io/nats-server/v2").CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("build nats-server: %w\n%s", err, out)
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	mport, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "-js", "-sd", filepath.Join(dir, "js"), "-a", "127.0.0.1",
		"-p", strconv.Itoa(port), "-m", strconv.Itoa(mport))
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &natsProcess{cmd: cmd, url: fmt.Sprintf("nats://127.0.0.1:%d", port), monitorURL: fmt.Sprintf("http://127.0.0.1:%d", mport)}
	// Each probe is bounded: a server that accepts and never answers would
	// hold http.Get past the deadline below.
	probe := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(20 * time.Second); ; {
		if resp, err := probe.Get(p.monitorURL + "/healthz?js-enabled-only=true"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, errors.New("nats-server not ready after 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *natsProcess) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	_ = p.cmd.Wait()
}

// cpu is the process's CPU time so far, in seconds.
func (p *natsProcess) cpu() float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clockTicks
}

// connMsgs is what /connz says the connections named name sent and got.
func (p *natsProcess) connMsgs(name string) (sent, got int64, err error) {
	resp, err := http.Get(p.monitorURL + "/connz?limit=65536")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var cz struct {
		Conns []struct {
			Name    string `json:"name"`
			InMsgs  int64  `json:"in_msgs"`
			OutMsgs int64  `json:"out_msgs"`
		} `json:"connections"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&cz); err != nil {
		return 0, 0, err
	}
	for _, c := range cz.Conns {
		if c.Name == name {
			sent, got = sent+c.InMsgs, got+c.OutMsgs
		}
	}
	return sent, got, nil
}

// busyRunner counts the jobs in its runner.
type busyRunner struct {
	jobs.Runner
	busy, started, done, failed atomic.Int64
}

func (b *busyRunner) Run(ctx context.Context, job *jobs.Job, env jobs.RunEnv) (*jobs.Outcome, error) {
	b.busy.Add(1)
	b.started.Add(1)
	defer func() { b.busy.Add(-1); b.done.Add(1) }()
	out, err := b.Runner.Run(ctx, job, env)
	if err != nil {
		b.failed.Add(1)
	}
	return out, err
}

// measureFullQueue queues jobs on a nats-server process, then starts one
// worker of conc slots over TCP and samples how many slots run a job while
// jobs are still waiting.
func measureFullQueue(ctx context.Context, dir, mcp string, conc, queued int) (_ *QueueRow, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ns, err := startNATSProcess(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer ns.stop()
	sc := &scripted{}
	model, err := llmtest.Start(llmtest.Script{Handler: sc.reply})
	if err != nil {
		return nil, err
	}
	defer model.Close()
	var stops []func() error
	defer func() {
		for _, stop := range slices.Backward(stops) {
			err = errors.Join(err, stop())
		}
	}()

	sub, err := nats.Connect(ns.url, nats.Name("bench-submitter"))
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	js, err := jetstream.New(sub)
	if err != nil {
		return nil, err
	}
	topo, err := jobs.EnsureTopology(ctx, js, jobs.TopologyConfig{}, nil)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(ns.url, nats.Name("bench-worker-0"))
	if err != nil {
		return nil, err
	}
	stops = append(stops, func() error { nc.Close(); return nil })
	br := &busyRunner{}
	bw, err := startWorker(ctx, nc, e2eSetup{mcp: mcp, conc: conc}, model.URL(), 0,
		func(r jobs.Runner) jobs.Runner { br.Runner = r; return br }, &stops)
	if err != nil {
		return nil, err
	}
	if err := sc.findAdd(bw.pool); err != nil {
		return nil, err
	}
	client, err := jobs.NewClient(ctx, sub, jobs.ClientConfig{})
	if err != nil {
		return nil, err
	}
	// Queue every job before the worker starts.
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < queued; i = int(next.Add(1)) - 1 {
				if _, err := client.Submit(ctx, &jobs.Job{ID: fmt.Sprintf("q-%d", i), Task: "What is 1 + 2?"}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}

	sent0, got0, err := ns.connMsgs("bench-worker-0")
	if err != nil {
		return nil, err
	}
	cpu0, ncpu0 := cpuTime(), ns.cpu()
	if err := bw.start(ctx, &stops); err != nil {
		return nil, err
	}
	cons := topo.Consumers[jobs.DefaultQueue]
	var busy, running []int
	var start time.Time
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(5 * time.Minute)
	for br.started.Load() < int64(queued) {
		select {
		case <-tick.C:
		case <-deadline:
			return nil, fmt.Errorf("only %d of %d queued jobs started after 5 minutes", br.started.Load(), queued)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if br.started.Load() == 0 {
			continue
		}
		if start.IsZero() {
			start = time.Now()
		}
		ci, err := cons.Info(ctx)
		if err != nil {
			return nil, err
		}
		busy, running = append(busy, ci.NumAckPending), append(running, int(br.busy.Load()))
	}
	for {
		ci, err := cons.Info(ctx)
		if err != nil {
			return nil, err
		}
		if br.done.Load() == int64(queued) && ci.NumPending == 0 && ci.NumAckPending == 0 {
			break
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			return nil, fmt.Errorf("%d of %d queued jobs done after 5 minutes", br.done.Load(), queued)
		}
	}
	elapsed := time.Since(start)
	cpu, ncpu := cpuTime()-cpu0, ns.cpu()-ncpu0
	sent, got, err := ns.connMsgs("bench-worker-0")
	if err != nil {
		return nil, err
	}
	mean := func(xs []int) float64 {
		sum := 0
		for _, x := range xs {
			sum += x
		}
		return float64(sum) / float64(max(1, len(xs)))
	}
	n := float64(queued)
	return &QueueRow{Concurrency: conc, Queued: queued, Failed: int(br.failed.Load()), JobsPerSec: n / elapsed.Seconds(),
		BusyMean: mean(busy), RunningMean: mean(running), CPUMsPerJob: 1000 * (cpu - ncpu) / n, NATSCPUMsPerJob: 1000 * ncpu / n,
		WorkerSentPerJob: float64(sent-sent0) / n, WorkerGotPerJob: float64(got-got0) / n}, nil
}
