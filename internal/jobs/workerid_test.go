package jobs

import (
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestDefaultWorkerID: the default worker id (host name and a suffix) is
// always a valid id, as JETAGENT_WORKER_ID must be: a host name with dots
// (node1.example.com) used to give an id the rule refuses.
func TestDefaultWorkerID(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		host, want string
	}{
		{"worker7", "worker7-abc123"},
		{"node1.example.com", "node1-example-com-abc123"},
		{"Node1.Example.COM.", "node1-example-com-abc123"},
		{"my_host-2", "my_host-2-abc123"},
		{"héllo wörld", "h-llo-w-rld-abc123"},
		{"", "worker-abc123"},
		{"...", "worker-abc123"},
		{strings.Repeat("a.", 100), strings.TrimSuffix(strings.Repeat("a-", 61), "-") + "-abc123"}, // 128 characters, the most an id has,
	} {
		got := defaultWorkerID(tt.host, "ABC123")
		if got != tt.want || !ValidID(got) {
			t.Errorf("defaultWorkerID(%q) = %q (valid: %v), want %q", tt.host, got, ValidID(got), tt.want)
		}
	}
	// The worker's own default, on a real server, names its states.
	s := startServer(t)
	nc := natstest.Connect(t, s)
	w, _ := startWorker(t, nc, Config{Runner: newTestRunner()})
	if !ValidID(w.ID()) {
		t.Fatalf("default worker id %q is not a valid id", w.ID())
	}
	c := newClient(t, nc)
	rc, err := c.Submit(natstest.Context(t), &Job{Task: "echo:hi"})
	if err != nil {
		t.Fatal(err)
	}
	if st := waitStatus(t, c, rc.ID); st.Status != StatusSucceeded || st.Worker != w.ID() {
		t.Errorf("state %s by %q, want succeeded by %q", st.Status, st.Worker, w.ID())
	}
}
