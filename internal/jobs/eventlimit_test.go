package jobs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/natstest"
)

// TestEventsOverTheStreamsMaxMsgSize: an events stream given a
// max_msg_size (nats stream edit AGENT_EVENTS --max-msg-size, an
// operator's setting; seen on a stock nats-server) refused every event
// over it, and the refused event was published again and again until
// each flush gave up after its 10 s ("events not acknowledged: context
// deadline exceeded"): the attempt ended 10 s later at each flush (20 s
// here) and the event was lost with no word in the events. An event over
// the limit now goes out as a preview with a reference, as one over
// max_payload does; under a limit too small for a preview, the refused
// event is dropped at once and an events.gap event says why.
func TestEventsOverTheStreamsMaxMsgSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		maxMsg  int32
		wantGap bool // else the big event's preview
	}{
		{"preview", 16 << 10, false},
		{"too small for a preview", 1500, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			nc, topo := startTopology(t)
			ctx := natstest.Context(t)
			// The operator's edit, before the worker starts.
			editStream(t, topo.JS, (Names{Prefix: DefaultPrefix}).EventsStream(), func(c *jetstream.StreamConfig) {
				c.MaxMsgSize = tt.maxMsg
			})
			big := strings.Repeat("z", 40<<10)
			runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
				if err := env.Emit(ctx, "tool.result", 1, map[string]any{"name": "cat", "output": big}); err != nil {
					return nil, err
				}
				if err := env.Emit(ctx, "note", 1, map[string]string{"text": "after"}); err != nil {
					return nil, err
				}
				return &Outcome{Result: agentloop.Result{Answer: "done"}}, nil
			})
			startWorker(t, nc, Config{Runner: runner, UnservedCheck: -1})
			c := newClient(t, nc)
			const id = "limited"
			start := time.Now()
			if _, err := c.Submit(ctx, &Job{ID: id, Task: "x"}); err != nil {
				t.Fatal(err)
			}
			if st := waitStatus(t, c, id); st.Status != StatusSucceeded {
				t.Fatalf("state %s %q", st.Status, st.Error)
			}
			var types []string
			var gapReason string
			var preview bool
			for _, ev := range watchEvents(t, c, id) {
				types = append(types, ev.Type)
				switch ev.Type {
				case EventGap:
					gapReason = string(ev.Data)
				case "tool.result":
					_, preview = EventDataRef(ev)
				}
			}
			got := strings.Join(types, ",")
			if !strings.Contains(got, "note") || !strings.HasSuffix(got, string(StatusSucceeded)) {
				t.Errorf("events %s: the ones after the big event are missing", got)
			}
			if tt.wantGap && !strings.Contains(gapReason, "refused by the events stream AGENT_EVENTS (message size exceeds maximum allowed") {
				t.Errorf("events %s, gap %s; want a gap saying the stream refused the event", got, gapReason)
			}
			if !tt.wantGap && !preview {
				t.Errorf("events %s; want the big event as a preview with a reference", got)
			}
			t.Logf("%s in %s", got, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestSubmitOverTheJobsStreamsMaxMsgSize: a job over the jobs stream's
// max_msg_size (an operator's setting) was refused with the server's words
// alone ('nats: nats: API error: code=400 err_code=10054 description=message
// size exceeds maximum allowed'); the error now names the setting, and no
// queued state is left for the job that was not published.
func TestSubmitOverTheJobsStreamsMaxMsgSize(t *testing.T) {
	t.Parallel()
	nc, topo := startTopology(t)
	ctx := natstest.Context(t)
	editStream(t, topo.JS, (Names{Prefix: DefaultPrefix}).JobsStream(), func(c *jetstream.StreamConfig) { c.MaxMsgSize = 200 })
	c := newClient(t, nc)
	_, err := c.Submit(ctx, &Job{ID: "too-big", Task: strings.Repeat("x", 500)})
	if err == nil || !strings.Contains(err.Error(), "message size exceeds maximum allowed (larger than the stream's max_msg_size, an operator's setting") {
		t.Fatalf("got %v", err)
	}
	if _, err := c.Status(ctx, "too-big"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a state was left: %v", err)
	}
}
