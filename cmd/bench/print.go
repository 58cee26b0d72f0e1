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
		head := "workers\tconcurrency\tjobs\tfailed\tjobs/s\tp50 ms\tp99 ms\tof sync pub\tNATS in/job\tNATS out/job\t"
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
			fmt.Fprintf(tw, "%.1f\t%.1f\t\n", x.InMsgsPerJob, x.OutMsgsPerJob)
		}
		return tw.Flush()
	}
	if err := table("(b) end to end, zero-latency scripted model, one MCP tools/call per job", r.E2E, false); err != nil {
		return err
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
	if r.Toolcache != "" {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "(e, f) toolcache benchmarks: pooled vs bare mcp-go call, spawn per call, search at 1,000 / 10,000 tools")
		fmt.Fprint(w, r.Toolcache)
	}
	return nil
}
