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
	rep, err := Run(t.Context(), Options{Jobs: 5, RawMsgs: 40, Conc: []int{2}, Workers: []int{1}, ModelDelay: 10 * time.Millisecond, Held: 3}, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if len(rep.Raw) != 4 || len(rep.E2E) != 1 || len(rep.Delayed) != 1 || rep.Memory == nil {
		t.Fatalf("rows: raw %d, e2e %d, delayed %d", len(rep.Raw), len(rep.E2E), len(rep.Delayed))
	}
	for _, r := range append(rep.E2E, rep.Delayed...) {
		if r.Failed != 0 || r.JobsPerSec <= 0 || r.InMsgsPerJob <= 0 {
			t.Errorf("row %+v", r)
		}
	}
	var out bytes.Buffer
	if err := rep.Print(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(a) raw JetStream", "(b) end to end", "(c) end to end", "NATS in/job"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	t.Log("\n" + out.String())
}
