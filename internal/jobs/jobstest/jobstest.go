// Package jobstest runs a jobs.Worker for the tests of packages built on
// jobs (the runner, telemetry, the CLIs): one helper instead of a copy of
// the start-and-wait-ready block in each. jobs' own tests have theirs
// (they cannot import this package).
package jobstest

import (
	"context"
	"testing"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/natstest"
)

// RunWorker builds a worker from cfg, runs it until the test ends and
// returns it once it takes jobs. The test fails if the worker cannot start
// or ends with an error.
func RunWorker(tb testing.TB, cfg jobs.Config) *jobs.Worker {
	tb.Helper()
	w, err := jobs.NewWorker(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	tb.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			tb.Errorf("worker: %v", err)
		}
	})
	select {
	case <-w.Ready():
	case err := <-done:
		tb.Fatalf("worker did not start: %v", err)
	case <-natstest.Context(tb).Done():
		tb.Fatal("worker not ready in time")
	}
	return w
}
