package jobs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestRefusedJobDeadLetteredOnceTheStoreHasRoom: a job refused at the door
// (here: not JSON) on its last allowed delivery while the store is full.
// Its dead-letter copy could not be stored and the delivery was handed
// back; being the last, nothing delivered it again, and the job stayed in
// the jobs stream for ever with no dead letter and no state saying why.
// The last delivery is now kept until the copy can be stored, as a claim
// and a final state are (TestLastDeliveryKeptWhileTheStoreIsFull,
// TestLastDeliverySettledOnceTheStoreHasRoom).
func TestRefusedJobDeadLetteredOnceTheStoreHasRoom(t *testing.T) {
	t.Parallel()
	topo := TopologyConfig{AckWait: 2 * time.Second, MaxDeliver: 1}
	nc, js, ctx := smallStore(t, topo)
	names, _ := NewNames("")
	if _, err := js.Publish(ctx, names.JobsSubject("default"), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	fill := fillStore(t, ctx, js)
	rec, log := newRecordLog()
	runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
		t.Error("a job that is not JSON ran")
		return nil, errors.New("ran")
	})
	startWorker(t, nc, Config{Runner: runner, WorkerID: "w1", Logger: log, Topology: topo})
	for {
		rec.mu.Lock()
		lines, added := strings.Join(rec.lines, "\n"), rec.added
		rec.mu.Unlock()
		if strings.Contains(lines, "last delivery cannot be settled") || strings.Contains(lines, "dead-letter copy failed") {
			break
		}
		select {
		case <-added:
		case <-ctx.Done():
			t.Fatalf("the dead-letter copy did not fail; log:\n%s", lines)
		}
	}
	if err := js.DeleteStream(ctx, fill.CachedInfo().Config.Name); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, nc)
	const id = "_seq-1" // a job without an id is named by its stream sequence
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	st, err := c.states.wait(wctx, id, func(s *State) bool { return s.Status.Terminal() })
	if err != nil {
		rec.mu.Lock()
		lines := strings.Join(rec.lines, "\n")
		rec.mu.Unlock()
		t.Fatalf("no final state once the store had room: %v\nlog:\n%s", err, lines)
	}
	if st.Status != StatusDead || !strings.Contains(st.Error, "job is not JSON") {
		t.Errorf("state %s (%s), want dead: not JSON", st.Status, st.Error)
	}
	if dls := streamMsgs(t, nc, c.names.DLQStream(), ""); len(dls) != 1 {
		t.Errorf("%d dead letters, want 1", len(dls))
	}
}
