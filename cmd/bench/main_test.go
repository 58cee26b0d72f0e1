package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestRunSmall runs every section once at a tiny size and prints the table,
// so the command does not rot.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds examples/mcpserver and runs embedded NATS")
	}
	var log bytes.Buffer
	const netDelay = time.Millisecond
	rep, err := Run(t.Context(), Options{Jobs: 5, RawMsgs: 40, Conc: []int{2}, Workers: []int{1}, ModelDelay: 10 * time.Millisecond, Held: 3,
		Catalogs: "../../../shared/catalogs", CatalogHeld: 3, CatalogConc: 2, SearchJobs: 3, SearchSizes: []int{100, 300},
		RTJobs: 3, NetDelay: netDelay, FullQueue: 20, FullQueueConc: 4}, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if len(rep.Raw) != 4 || len(rep.E2E) != 1 || len(rep.Delayed) != 1 || rep.Memory == nil {
		t.Fatalf("rows: raw %d, e2e %d, delayed %d", len(rep.Raw), len(rep.E2E), len(rep.Delayed))
	}
	// The proxy holds each direction's bytes netDelay, so the delayed round
	// trip is at least twice that on any machine. It was compared with the
	// direct one instead (tens of microseconds, the median of nine pings):
	// a bet that a loaded machine's scheduler never stalls five of them for
	// two milliseconds.
	if rt := rep.RoundTrips; rt == nil || rt.Direct.NetRTTms <= 0 || rt.Delayed.NetRTTms < 2*ms(netDelay) {
		t.Fatalf("round trips %+v", rep.RoundTrips)
	}
	if q := rep.FullQueue; q == nil || q.Failed != 0 || q.Queued != 20 || q.BusyMean <= 0 || q.WorkerSentPerJob <= 0 {
		t.Fatalf("full queue %+v", q)
	}
	rows := append(rep.E2E, rep.Delayed...)
	rows = append(rows, rep.RoundTrips.Direct, rep.RoundTrips.Delayed)
	wants := []string{"(a) raw JetStream", "(b) end to end", "(c) end to end", "NATS in/job", "CPU ms/job",
		"(g) NATS round trips", "(h) full queue", "worker sent/job"}
	if len(rep.Skipped) > 0 {
		t.Logf("skipped: %v", rep.Skipped)
		wants = append(wants, "skipped")
	} else {
		if rep.Catalog == nil || len(rep.Search) != 3 {
			t.Fatalf("large catalog %v, search rows %d", rep.Catalog, len(rep.Search))
		}
		c := rep.Catalog
		if c.LargeCPU.ViewTools < 1000 || c.SmallCPU.ViewTools != 5 || c.LargeMem.Jobs != 3 || c.LargeCPU.SeenMode != "search" {
			t.Errorf("large catalog %+v", c)
		}
		for i, want := range []int{5, 105, 305} {
			if r := rep.Search[i]; r.ViewTools != want || r.SeenMode != "search" {
				t.Errorf("search row %d: %d tools (want %d), mode %q", i, r.ViewTools, want, r.SeenMode)
			}
		}
		rows = append(append(rows, c.SmallCPU, c.LargeCPU), rep.Search...)
		wants = append(wants, "(d2) large catalog", "(f) search-mode jobs")
	}
	for _, r := range rows {
		if r.Failed != 0 || r.JobsPerSec <= 0 || r.InMsgsPerJob <= 0 {
			t.Errorf("row %+v", r)
		}
	}
	for _, r := range rep.E2E {
		if r.WorkerSentPerJob <= 0 || r.WorkerGotPerJob <= 0 {
			t.Errorf("no worker messages counted: %+v", r)
		}
		if r.CPUMsPerJob <= 0 {
			t.Errorf("no CPU measured: %+v", r)
		}
	}
	var out bytes.Buffer
	if err := rep.Print(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range wants {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	t.Log("\n" + out.String())
}
