package main

import (
	"context"
	"strings"
	"testing"
)

// /readyz said "ready" through the whole shutdown grace period, while the
// worker took no new jobs: an orchestrator kept counting it as capacity
// (seen by a helper with SIGTERM mid-run). Once serve's context ends it
// is not ready, whatever else holds.
func TestReadyzDuringShutdown(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	var st startState
	ready := readiness(ctx, &st)
	if err := ready(); err == nil || !strings.Contains(err.Error(), "worker starting") {
		t.Errorf("before: %v, want worker starting", err)
	}
	cancel()
	if err := ready(); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Errorf("after the signal: %v, want shutting down", err)
	}
}
