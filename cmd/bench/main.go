package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Options selects what one run measures.
type Options struct {
	Jobs       int           // jobs per e2e row (fewer for slow rows, see rowJobs)
	RawMsgs    int           // messages per raw JetStream measurement
	Conc       []int         // concurrency levels
	Workers    []int         // worker counts
	ModelDelay time.Duration // model latency of the Little's-law rows (0: skip them)
	Toolcache  bool          // also run the toolcache benchmarks through go test
	Held       int           // jobs held in flight for the memory row (0: skip)
}

// Report is everything one run measured.
type Report struct {
	Machine   Machine  `json:"machine"`
	Raw       []RawRow `json:"raw"`
	E2E       []E2ERow `json:"e2e"`
	Delayed   []E2ERow `json:"model_latency,omitempty"`
	Memory    *MemRow  `json:"memory,omitempty"`
	Elapsed   string   `json:"elapsed"`
	Toolcache string   `json:"toolcache,omitempty"`
}

// Machine names where the numbers come from.
type Machine struct {
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
}

func main() {
	var o Options
	var asJSON bool
	var conc, workers string
	flag.IntVar(&o.Jobs, "jobs", 400, "jobs per end-to-end row")
	flag.IntVar(&o.RawMsgs, "raw", 20000, "messages per raw JetStream measurement")
	flag.StringVar(&conc, "concurrency", "1,16,64,256", "jobs in flight per row, comma-separated")
	flag.StringVar(&workers, "workers", "1,2", "worker counts, comma-separated")
	flag.DurationVar(&o.ModelDelay, "model-latency", 200*time.Millisecond, "model latency of the Little's-law rows (0: skip)")
	flag.BoolVar(&o.Toolcache, "toolcache", true, "also run the toolcache MCP-call and search benchmarks (go test)")
	flag.IntVar(&o.Held, "held", 1000, "jobs in flight for the memory-per-job row (0: skip)")
	flag.BoolVar(&asJSON, "json", false, "print JSON instead of the table")
	flag.Parse()
	var err error
	if o.Conc, err = ints(conc); err == nil {
		o.Workers, err = ints(workers)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := Run(ctx, o, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.Print(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || n <= 0 {
			return nil, fmt.Errorf("%q: want positive integers, comma-separated", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// Run measures everything o selects; progress goes to logw.
func Run(ctx context.Context, o Options, logw io.Writer) (*Report, error) {
	start := time.Now()
	dir, err := os.MkdirTemp("", "jetagent-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "mcpserver")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/jetagent/jetagent/examples/mcpserver")
	build.Stdout, build.Stderr = logw, logw
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("build examples/mcpserver: %w", err)
	}
	rep := &Report{Machine: Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}}

	fmt.Fprintln(logw, "bench: raw JetStream")
	if rep.Raw, err = measureRaw(ctx, filepath.Join(dir, "raw"), o.RawMsgs); err != nil {
		return nil, fmt.Errorf("raw: %w", err)
	}
	row := 0
	for _, delay := range []time.Duration{0, o.ModelDelay} {
		if delay == 0 && row > 0 {
			break
		}
		for _, w := range o.Workers {
			for _, c := range o.Conc {
				row++
				n := rowJobs(o.Jobs, c, delay)
				fmt.Fprintf(logw, "bench: %d worker(s), concurrency %d, model latency %s, %d jobs\n", w, c, delay, n)
				r, err := measureE2E(ctx, e2eSetup{dir: filepath.Join(dir, fmt.Sprintf("row%d", row)), mcp: bin,
					workers: w, conc: c, jobs: n, delay: delay})
				if err != nil {
					return nil, fmt.Errorf("%d worker(s), concurrency %d, model latency %s: %w", w, c, delay, err)
				}
				if delay == 0 {
					rep.E2E = append(rep.E2E, *r)
				} else {
					rep.Delayed = append(rep.Delayed, *r)
				}
			}
		}
		if o.ModelDelay == 0 {
			break
		}
	}
	if o.Held > 0 {
		fmt.Fprintf(logw, "bench: memory with %d jobs in flight\n", o.Held)
		r, err := measureE2E(ctx, e2eSetup{dir: filepath.Join(dir, "held"), mcp: bin, workers: 1, conc: o.Held, hold: o.Held})
		if err != nil {
			return nil, fmt.Errorf("memory with %d jobs in flight: %w", o.Held, err)
		}
		rep.Memory = r.Mem
	}
	if o.Toolcache {
		fmt.Fprintln(logw, "bench: toolcache benchmarks (go test)")
		if rep.Toolcache, err = runToolcache(ctx); err != nil {
			return nil, fmt.Errorf("toolcache benchmarks: %w", err)
		}
	}
	rep.Elapsed = time.Since(start).Round(time.Second).String()
	return rep, nil
}

// rowJobs is the jobs of one row: o.Jobs, but with a slow model only as
// many as keep the row to about ten rounds of C jobs.
func rowJobs(jobs, c int, delay time.Duration) int {
	if delay == 0 {
		return max(jobs, c)
	}
	return max(min(jobs, 10*c), 2*c, 5)
}

// toolcacheBenchmarks are the toolcache benchmarks --toolcache runs: the
// pooled call against a bare mcp-go client, spawning a server per call, and
// tool search at 1,000 and 10,000 tools.
var toolcacheBenchmarks = [][]string{
	{"-bench", "CallRoundTrip/mcpgo-stdio$", "-benchtime", "2000x"},
	{"-bench", "SpawnPerCall/mcpgo-stdio$", "-benchtime", "20x"},
	{"-bench", "SearchScale", "-benchtime", "20x"},
}

func runToolcache(ctx context.Context) (string, error) {
	var b strings.Builder
	for _, args := range toolcacheBenchmarks {
		cmd := exec.CommandContext(ctx, "go", append([]string{"test", "-run", "^$", "-benchmem"}, append(args, "github.com/jetagent/jetagent/internal/toolcache")...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("go test %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "Benchmark") {
				b.WriteString(l + "\n")
			}
		}
	}
	return b.String(), nil
}
