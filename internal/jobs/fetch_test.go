package jobs

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/natstest"
)

// TestFetchAsksForFreeSlots: with a full queue the fetch loop asks for as
// many jobs as it has free slots in one request (no-wait, since the
// consumer said jobs were left), and never for more: two requests fill
// four slots, and the jobs beyond them stay on the server.
func TestFetchAsksForFreeSlots(t *testing.T) {
	t.Parallel()
	nc, topo := startTopology(t)
	ctx := natstest.Context(t)
	js := topo.JS
	c := newClient(t, nc)
	for i := range 8 {
		if _, err := c.Submit(ctx, &Job{ID: fmt.Sprintf("j%d", i), Task: "gate:go"}); err != nil {
			t.Fatal(err)
		}
	}
	type pull struct {
		Batch   int   `json:"batch"`
		Expires int64 `json:"expires"`
		NoWait  bool  `json:"no_wait"`
	}
	pulls := make(chan pull, 16)
	sub, err := nc.Subscribe(fmt.Sprintf("$JS.API.CONSUMER.MSG.NEXT.%s.%s", c.names.JobsStream(), c.names.Consumer(DefaultQueue)),
		func(m *nats.Msg) {
			var p pull
			if err := json.Unmarshal(m.Data, &p); err != nil {
				t.Errorf("pull request %q: %v", m.Data, err)
			}
			pulls <- p
		})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe() //nolint:errcheck // test cleanup
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	r := newTestRunner()
	startWorker(t, nc, Config{Runner: r, Concurrency: 4})
	r.waitStarted(t, 4)
	var got []pull
	for len(got) < 2 {
		select {
		case p := <-pulls:
			got = append(got, p)
		case <-time.After(waitTimeout):
			t.Fatalf("pull requests seen: %+v", got)
		}
	}
	// Nothing was left when it started: one long poll for one job. Then
	// seven were left and three slots free: one request for three.
	if got[0].Batch != 1 || got[0].NoWait || got[0].Expires == 0 {
		t.Errorf("first pull %+v, want a long poll for 1", got[0])
	}
	if got[1].Batch != 3 || !got[1].NoWait {
		t.Errorf("second pull %+v, want a no-wait request for 3", got[1])
	}
	ci, err := js.Consumer(ctx, c.names.JobsStream(), c.names.Consumer(DefaultQueue))
	if err != nil {
		t.Fatal(err)
	}
	info, err := ci.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 4 || info.NumPending != 4 {
		t.Errorf("ack pending %d, pending %d; want 4 and 4", info.NumAckPending, info.NumPending)
	}
	r.release("go")
	for i := range 8 {
		if st := waitStatus(t, c, fmt.Sprintf("j%d", i)); st.Status != StatusSucceeded {
			t.Errorf("j%d: %+v", i, st)
		}
	}
	if p := r.peakConcurrency(); p != 4 {
		t.Errorf("peak concurrency %d, want 4", p)
	}
}
