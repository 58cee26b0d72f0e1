package jobs

import (
	"errors"
	"testing"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestQueuedMessageGone: a queued job whose message left the jobs stream
// (purged, deleted, the stream removed) is told apart from one whose
// message waits, with its state's revision unchanged, so submit can say no
// worker will run it; a job that ended, or has no state, is not such a job.
func TestQueuedMessageGone(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	startWorker(t, nc, Config{Runner: newTestRunner(), UnservedCheck: -1})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	// On a queue no worker serves: it stays queued.
	rc, err := c.Submit(ctx, &Job{ID: "lost-msg", Queue: "nobody", Task: "echo:x"})
	if err != nil {
		t.Fatal(err)
	}
	if st, _, gone, err := c.QueuedMessageGone(ctx, "lost-msg"); err != nil || gone || st.StreamSeq != rc.Seq {
		t.Fatalf("waiting on its message: gone %v, %+v, %v", gone, st, err)
	}
	if err := c.topo.Jobs.DeleteMsg(ctx, rc.Seq); err != nil {
		t.Fatal(err)
	}
	_, rev1, gone1, err1 := c.QueuedMessageGone(ctx, "lost-msg")
	_, rev2, gone2, err2 := c.QueuedMessageGone(ctx, "lost-msg")
	if !gone1 || !gone2 || rev1 != rev2 || err1 != nil || err2 != nil {
		t.Fatalf("message deleted: gone %v %v, revisions %d %d, %v %v", gone1, gone2, rev1, rev2, err1, err2)
	}
	if _, err := c.Cancel(ctx, "lost-msg"); err != nil {
		t.Fatal(err)
	}
	if st, _, gone, err := c.QueuedMessageGone(ctx, "lost-msg"); err != nil || gone || st.Status != StatusCancelled {
		t.Fatalf("cancelled: gone %v, %+v, %v", gone, st, err)
	}
	if _, _, gone, err := c.QueuedMessageGone(ctx, "no-such-job"); gone || !errors.Is(err, ErrNotFound) {
		t.Fatalf("no state: gone %v, %v", gone, err)
	}
}
