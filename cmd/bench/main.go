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
	"runtime/pprof"
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
	// Catalogs is the directory of captured tools/list catalogs (*.json)
	// for the large-catalog and search-mode parts ("" or absent: skip).
	Catalogs    string
	CatalogHeld int   // jobs held in flight for the large-catalog memory (0: skip the part)
	CatalogConc int   // jobs in flight for the large-catalog CPU row
	SearchJobs  int   // jobs per search-mode row, one in flight (0: skip the part)
	SearchSizes []int // catalog sizes of the search-mode rows
	// RTJobs is the jobs of each round-trip row (0: skip the part);
	// NetDelay the one-way delay the proxy adds.
	RTJobs   int
	NetDelay time.Duration
	// FullQueue is the jobs queued before one worker of FullQueueConc
	// slots starts, on a nats-server process (0: skip the part).
	FullQueue, FullQueueConc int
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
	// Catalog compares the example catalog with all captured catalogs.
	Catalog *CatalogReport `json:"large_catalog,omitempty"`
	// Search is search-mode jobs on the example catalog and on catalogs of
	// SearchSizes tools.
	Search []E2ERow `json:"search_mode,omitempty"`
	// RoundTrips is the same one-job-at-a-time run with the worker's NATS
	// connection direct and through a delay proxy.
	RoundTrips *RoundTripReport `json:"round_trips,omitempty"`
	// FullQueue is one worker working through a full queue.
	FullQueue *QueueRow `json:"full_queue,omitempty"`
	// Skipped says which parts were skipped and why.
	Skipped []string `json:"skipped,omitempty"`
}

// CatalogReport is the same jobs with the example server alone and with
// the captured catalogs added in process.
type CatalogReport struct {
	SmallCPU E2ERow `json:"example_cpu"`
	LargeCPU E2ERow `json:"captured_cpu"`
	SmallMem MemRow `json:"example_memory"`
	LargeMem MemRow `json:"captured_memory"`
}

// RoundTripReport counts a job's sequential NATS round trips: the extra
// time per job (the median cycle, submission to the next submission, one
// job in flight) a network delay on the worker's connection costs, divided
// by the extra round trip measured on that connection.
type RoundTripReport struct {
	Direct  E2ERow  `json:"direct"`
	Delayed E2ERow  `json:"delayed"`
	PerJob  float64 `json:"round_trips_per_job"`
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
	flag.StringVar(&o.Catalogs, "catalogs", "../shared/catalogs", "directory of captured tools/list catalogs (*.json) for the large-catalog and search-mode parts")
	flag.IntVar(&o.CatalogHeld, "catalog-held", 200, "jobs in flight for the large-catalog memory row (0: skip the large-catalog part)")
	flag.IntVar(&o.CatalogConc, "catalog-concurrency", 16, "jobs in flight for the large-catalog CPU row")
	flag.IntVar(&o.SearchJobs, "search-jobs", 100, "jobs per search-mode row, one in flight (0: skip)")
	var sizes string
	flag.StringVar(&sizes, "search-sizes", "1000,10000", "catalog sizes of the search-mode rows, comma-separated")
	flag.IntVar(&o.RTJobs, "rt-jobs", 60, "jobs per round-trip row, one in flight (0: skip the part)")
	flag.DurationVar(&o.NetDelay, "net-delay", 5*time.Millisecond, "one-way delay the proxy adds to the worker's connection in the round-trip part")
	flag.IntVar(&o.FullQueue, "full-queue", 3000, "jobs queued before the worker starts, on a nats-server process (0: skip the part)")
	flag.IntVar(&o.FullQueueConc, "full-queue-concurrency", 256, "the worker's slots in the full-queue part")
	flag.BoolVar(&asJSON, "json", false, "print JSON instead of the table")
	var cpuProfile string
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof; pick the parts with the flags above)")
	flag.Parse()
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	var err error
	if o.Conc, err = ints(conc); err == nil {
		if o.Workers, err = ints(workers); err == nil {
			o.SearchSizes, err = ints(sizes)
		}
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
		pprof.StopCPUProfile()
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
		pprof.StopCPUProfile()
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
	if o.RTJobs > 0 {
		rt := &RoundTripReport{}
		for i, delay := range []time.Duration{0, o.NetDelay} {
			fmt.Fprintf(logw, "bench: round trips, worker connection over TCP, one-way delay %s, %d jobs\n", delay, o.RTJobs)
			r, err := measureE2E(ctx, e2eSetup{dir: filepath.Join(dir, fmt.Sprintf("rt%d", i)), mcp: bin,
				workers: 1, conc: 1, jobs: o.RTJobs, tcp: true, netDelay: delay})
			if err != nil {
				return nil, fmt.Errorf("round trips, delay %s: %w", delay, err)
			}
			if delay == 0 {
				rt.Direct = *r
			} else {
				rt.Delayed = *r
			}
		}
		if rt.Delayed.NetRTTms > rt.Direct.NetRTTms {
			rt.PerJob = (rt.Delayed.CycleP50ms - rt.Direct.CycleP50ms) / (rt.Delayed.NetRTTms - rt.Direct.NetRTTms)
		}
		rep.RoundTrips = rt
	}
	if o.FullQueue > 0 {
		fmt.Fprintf(logw, "bench: full queue, %d jobs queued, 1 worker of %d slots, nats-server process\n", o.FullQueue, o.FullQueueConc)
		if rep.FullQueue, err = measureFullQueue(ctx, filepath.Join(dir, "fullqueue"), bin, o.FullQueueConc, o.FullQueue); err != nil {
			return nil, fmt.Errorf("full queue: %w", err)
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
	if err := measureCatalogs(ctx, o, dir, bin, rep, logw); err != nil {
		return nil, err
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

// measureCatalogs runs the large-catalog part (the same jobs with the
// example server alone and with every captured catalog added in process)
// and the search-mode part (search_tools, then call_tool, on the example
// catalog and on catalogs of o.SearchSizes tools).
func measureCatalogs(ctx context.Context, o Options, dir, bin string, rep *Report, logw io.Writer) error {
	if o.CatalogHeld <= 0 && o.SearchJobs <= 0 {
		return nil
	}
	var sets []catalogSet
	var err error
	if o.Catalogs != "" {
		if sets, err = loadCatalogs(o.Catalogs); err != nil {
			return fmt.Errorf("catalogs: %w", err)
		}
	}
	if sets == nil {
		msg := fmt.Sprintf("large-catalog and search-mode parts skipped: no catalogs (*.json) in %q", o.Catalogs)
		fmt.Fprintln(logw, "bench:", msg)
		rep.Skipped = append(rep.Skipped, msg)
		return nil
	}
	row := 0
	e2e := func(what string, su e2eSetup) (*E2ERow, error) {
		row++
		su.dir, su.mcp = filepath.Join(dir, fmt.Sprintf("cat%d", row)), bin
		fmt.Fprintf(logw, "bench: %s\n", what)
		r, err := measureE2E(ctx, su)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return r, nil
	}
	if o.CatalogHeld > 0 {
		c := &CatalogReport{}
		for _, big := range []bool{false, true} {
			var cat []catalogSet
			label := "example catalog"
			if big {
				cat, label = sets, fmt.Sprintf("%d captured tools", countTools(sets))
			}
			n := max(o.Jobs, o.CatalogConc)
			cpu, err := e2e(fmt.Sprintf("%s, concurrency %d, %d jobs", label, o.CatalogConc, n),
				e2eSetup{workers: 1, conc: o.CatalogConc, jobs: n, catalog: cat})
			if err != nil {
				return err
			}
			mem, err := e2e(fmt.Sprintf("%s, memory with %d jobs in flight", label, o.CatalogHeld),
				e2eSetup{workers: 1, conc: o.CatalogHeld, hold: o.CatalogHeld, catalog: cat})
			if err != nil {
				return err
			}
			mem.Mem.Jobs = o.CatalogHeld
			if big {
				c.LargeCPU, c.LargeMem = *cpu, *mem.Mem
			} else {
				c.SmallCPU, c.SmallMem = *cpu, *mem.Mem
			}
		}
		rep.Catalog = c
	}
	if o.SearchJobs > 0 {
		for _, size := range append([]int{0}, o.SearchSizes...) {
			var cat []catalogSet
			label := "example catalog"
			if size > 0 {
				cat, label = scaleCatalogs(sets, size), fmt.Sprintf("%d catalog tools", size)
			}
			r, err := e2e(fmt.Sprintf("search mode, %s, %d jobs", label, o.SearchJobs),
				e2eSetup{workers: 1, conc: 1, jobs: o.SearchJobs, catalog: cat, mode: "search", search: true})
			if err != nil {
				return err
			}
			rep.Search = append(rep.Search, *r)
		}
	}
	return nil
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
