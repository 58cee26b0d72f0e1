package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Print writes the report as text tables.
func (r *Report) Print(w io.Writer) error {
	fmt.Fprintf(w, "machine: %d CPUs, %s, %s; run took %s\n\n", r.Machine.CPUs, r.Machine.GoVersion, r.Machine.OS, r.Elapsed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "(a) raw JetStream, the worker's stream and consumer settings")
	fmt.Fprintln(tw, "op\tmsgs\tmsgs/s\t")
	for _, x := range r.Raw {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t\n", x.Op, x.Msgs, x.PerSecond)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var syncPub float64
	if len(r.Raw) > 0 {
		syncPub = r.Raw[0].PerSecond
	}
	table := func(title string, rows []E2ERow, little bool) error {
		if len(rows) == 0 {
			return nil
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, title)
		head := "workers\tconcurrency\tjobs\tfailed\tjobs/s\tp50 ms\tp99 ms\tof sync pub\tNATS in/job\tNATS out/job\tworker sent/job\tworker got/job\tCPU ms/job\t"
		if little {
			head = "workers\tconcurrency\tjobs\tfailed\tjobs/s\tp50 ms\tp99 ms\tLittle bound\tof bound\tNATS in/job\tNATS out/job\t"
		}
		fmt.Fprintln(tw, head)
		for _, x := range rows {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t", x.Workers, x.Concurrency, x.Jobs, x.Failed, x.JobsPerSec, x.P50ms, x.P99ms)
			if little {
				fmt.Fprintf(tw, "%.1f\t%.0f%%\t", x.LittleBound, 100*x.JobsPerSec/x.LittleBound)
			} else if syncPub > 0 {
				fmt.Fprintf(tw, "%.2f%%\t", 100*x.JobsPerSec/syncPub)
			} else {
				fmt.Fprint(tw, "-\t")
			}
			fmt.Fprintf(tw, "%.1f\t%.1f\t", x.InMsgsPerJob, x.OutMsgsPerJob)
			if !little {
				fmt.Fprintf(tw, "%.1f\t%.1f\t%.2f\t", x.WorkerSentPerJob, x.WorkerGotPerJob, x.CPUMsPerJob)
			}
			fmt.Fprintln(tw)
		}
		return tw.Flush()
	}
	if err := table("(b) end to end, zero-latency scripted model, one MCP tools/call per job", r.E2E, false); err != nil {
		return err
	}
	if len(r.E2E) > 0 {
		fmt.Fprintln(w, "  CPU ms/job: user+sys CPU of this process (worker(s), embedded NATS, and also the submitter and the\n"+
			"  scripted model, which run in it: an upper bound for worker+NATS) plus the MCP server processes, over the timed jobs;\n"+
			"  worker sent/got: messages of the workers' own connections to and from the server (server.Connz)")
	}
	if rt := r.RoundTrips; rt != nil {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "(g) NATS round trips per job: one worker, one job in flight, its NATS connection over TCP, direct and")
		fmt.Fprintln(w, "    through a proxy delaying each direction; round trips = extra cycle ms / extra round-trip ms (cycle: the")
		fmt.Fprintln(w, "    median time from a job's submission to the next's; p50: submission to the terminal state)")
		fmt.Fprintln(tw, "connection\tRTT ms\tjobs\tfailed\tjobs/s\tcycle ms\tp50 ms\tworker sent/job\tworker got/job\tCPU ms/job\t")
		for _, x := range []struct {
			name string
			row  E2ERow
		}{{"direct", rt.Direct}, {"delayed", rt.Delayed}} {
			fmt.Fprintf(tw, "%s\t%.2f\t%d\t%d\t%.1f\t%.2f\t%.1f\t%.1f\t%.1f\t%.2f\t\n", x.name, x.row.NetRTTms, x.row.Jobs, x.row.Failed,
				x.row.JobsPerSec, x.row.CycleP50ms, x.row.P50ms, x.row.WorkerSentPerJob, x.row.WorkerGotPerJob, x.row.CPUMsPerJob)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "    sequential NATS round trips per job: %.1f\n", rt.PerJob)
	}
	if q := r.FullQueue; q != nil {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "(h) full queue: %d jobs queued on a nats-server process, then one worker of %d slots over TCP (zero-latency\n", q.Queued, q.Concurrency)
		fmt.Fprintln(w, "    model); busy = slots holding a job (the consumer's ack pending), running = jobs in the runner; means of")
		fmt.Fprintln(w, "    samples every 10 ms until the last job started")
		fmt.Fprintln(tw, "slots\tqueued\tfailed\tjobs/s\tbusy slots\tbusy share\trunning\tCPU ms/job (this process + MCP)\tnats-server CPU ms/job\tworker sent/job\tworker got/job\t")
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.1f\t%.1f\t%.0f%%\t%.1f\t%.2f\t%.2f\t%.1f\t%.1f\t\n", q.Concurrency, q.Queued, q.Failed, q.JobsPerSec,
			q.BusyMean, 100*q.BusyMean/float64(q.Concurrency), q.RunningMean, q.CPUMsPerJob, q.NATSCPUMsPerJob, q.WorkerSentPerJob, q.WorkerGotPerJob)
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	var delay string
	if len(r.Delayed) > 0 {
		delay = r.Delayed[0].ModelLatency
	}
	if err := table("(c) end to end, model latency "+delay+" (two model requests per job; bound = C / (2 × latency))", r.Delayed, true); err != nil {
		return err
	}
	if m := r.Memory; m != nil {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "(d) memory with %d jobs in flight (1 worker, all held at their first model request; whole process:\n"+
			"    worker, embedded NATS, submitter, scripted model): %.1f KB live heap and %.1f goroutines per job\n",
			m.Jobs, m.HeapKBPerJob, m.GoroutinesPerJob)
	}
	if c := r.Catalog; c != nil {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "(d2) large catalog: the same jobs (default tool_mode, 1 worker) with the example server alone and with every")
		fmt.Fprintln(w, "     captured catalog added as in-process mcp-go servers (verbatim schemas; add still on the example server)")
		fmt.Fprintln(tw, "tools in view\tmode seen\tCPU ms/job\tjobs/s\tp50 ms\tp99 ms\tNATS in/job\tNATS out/job\theap KB/job\tgoroutines/job\t")
		for _, x := range []struct {
			cpu E2ERow
			mem MemRow
		}{{c.SmallCPU, c.SmallMem}, {c.LargeCPU, c.LargeMem}} {
			fmt.Fprintf(tw, "%d\t%s\t%.2f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", x.cpu.ViewTools, x.cpu.SeenMode, x.cpu.CPUMsPerJob, x.cpu.JobsPerSec,
				x.cpu.P50ms, x.cpu.P99ms, x.cpu.InMsgsPerJob, x.cpu.OutMsgsPerJob, x.mem.HeapKBPerJob, x.mem.GoroutinesPerJob)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "     CPU and latency: %d jobs, %d in flight; memory: %d jobs held at their first model request (as (d))\n",
			c.SmallCPU.Jobs, c.SmallCPU.Concurrency, c.SmallMem.Jobs)
	}
	if len(r.Search) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "(f) search-mode jobs (tool_mode search; model: search_tools, call_tool of add, answer = 3 model requests),")
		fmt.Fprintln(w, "    1 worker, one job in flight; catalog tools are in-process servers (real captures, then suffixed copies)")
		fmt.Fprintln(tw, "tools in view\tjobs\tfailed\tp50 ms\tp99 ms\tCPU ms/job\tp50 vs example\tCPU vs example\tNATS in/job\t")
		base := r.Search[0]
		for _, x := range r.Search {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%.1f\t%.1f\t%.2f\t%+.1f ms\t%+.2f ms\t%.1f\t\n", x.ViewTools, x.Jobs, x.Failed, x.P50ms, x.P99ms,
				x.CPUMsPerJob, x.P50ms-base.P50ms, x.CPUMsPerJob-base.CPUMsPerJob, x.InMsgsPerJob)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, s := range r.Skipped {
		fmt.Fprintln(w)
		fmt.Fprintln(w, s)
	}
	if r.Toolcache != "" {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "(e) toolcache benchmarks: pooled vs bare mcp-go call, spawn per call, the registry search alone at 1,000 / 10,000 tools")
		fmt.Fprint(w, r.Toolcache)
	}
	return nil
}
