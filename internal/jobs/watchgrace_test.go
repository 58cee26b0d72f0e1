package jobs

import (
	"fmt"
	"testing"

	"github.com/jetagent/jetagent/internal/natstest"
)

// Watch shows the terminal event the stream holds, however late its
// consumer delivers it. It gave up a fixed grace after the state turned
// final, which a loaded machine's consumer could outlast: the watcher
// missed the job's last event. Here the grace is all but none, and the
// final state and the event race to Watch.
func TestWatchWaitsForAStoredTerminalEvent(t *testing.T) {
	t.Parallel()
	nc, topo := startTopology(t)
	ctx := natstest.Context(t)
	c := newClient(t, nc)
	c.terminalGrace = 1 // an event not stored yet is not waited for
	for i := range 20 {
		id := fmt.Sprintf("ended-%d", i)
		for seq, typ := range []string{"started", string(StatusSucceeded)} {
			if err := publishEvent(ctx, topo.JS, c.names, Event{JobID: id, Type: typ, Attempt: 1, Seq: seq + 1}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.states.update(ctx, id, func(*State) (*State, error) {
			return &State{ID: id, Queue: DefaultQueue, Status: StatusSucceeded, Attempt: 1}, nil
		}); err != nil {
			t.Fatal(err)
		}
		var got []string
		st, err := c.Watch(ctx, id, func(ev Event) { got = append(got, ev.Type) })
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != StatusSucceeded || len(got) != 2 || got[1] != string(StatusSucceeded) {
			t.Fatalf("job %s: state %s, events %v; want both events, the terminal one last", id, st.Status, got)
		}
	}
}
