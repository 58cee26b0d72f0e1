package jobs

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/natstest"
)

// TestHTMLCharactersKeepTheirSize: '<', '>' and '&' (HTML, code, shell
// redirections) are one byte each in what the worker and the client
// publish, as in what they measured. encoding/json's default escapes each
// to six bytes (\u003c): Client.Submit refused a 20 KB job file of '<'
// as "job too large: 120042 bytes, limit 61440" on a 64 KiB server (a raw
// publish of the same bytes runs), and an event reduced to its preview to
// fit max_payload grew sixfold past it when published: its publish failed
// with nats: maximum payload exceeded, and every later event of the
// attempt, its terminal event included, stayed unpublished (seen end to
// end with bin/worker on a stock nats-server with max_payload 16384).
func TestHTMLCharactersKeepTheirSize(t *testing.T) {
	t.Parallel()
	const maxPayload = 16 << 10
	s := startSmallServer(t, maxPayload)
	nc := natstest.Connect(t, s)

	type emit struct {
		typ  string
		data any
	}
	tests := []struct {
		name  string
		task  string // the job's task
		emits []emit
	}{
		{"tool output of angle brackets", "a", []emit{
			{"tool.result", map[string]any{"call_id": "c1", "name": "html", "output": strings.Repeat("<", 40_000)}},
		}},
		{"two fields of ampersands", "b", []emit{
			{"tool.call", map[string]any{"call_id": "c1", "name": "sh", "arguments": strings.Repeat("&", 9000),
				"note": strings.Repeat(">", 9000)}},
		}},
		{"a string, not an object", "c", []emit{{"blob", strings.Repeat("<>&", 20_000)}}},
		// One byte under the job limit once published, every task byte a '<'.
		{"a job of '<' at the limit", "", nil},
	}
	emits := map[string][]emit{}
	for i, tt := range tests {
		if tt.task == "" {
			// {"id":"...","task":"<<<...","queue":"default"} of limit-1 bytes.
			frame := len(`{"id":"","task":"","queue":"default"}`) + len(htmlJobID(tt.name))
			tests[i].task = strings.Repeat("<", MaxJobBytesFor(nc)-1-frame)
		}
		emits[tests[i].task] = tt.emits
	}
	runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
		for _, e := range emits[job.Task] {
			if err := env.Emit(ctx, e.typ, 1, e.data); err != nil {
				return nil, err
			}
		}
		if err := env.Emit(ctx, "note", 1, map[string]string{"text": "after"}); err != nil {
			return nil, err
		}
		return &Outcome{Result: agentloop.Result{Answer: "done", Rounds: 1, StopReason: "final_answer"}}, nil
	})
	startWorker(t, nc, Config{Runner: runner})
	c := newClient(t, nc)

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := natstest.Context(t) // here: a parallel subtest may wait for its turn
			id, task := htmlJobID(tt.name), tt.task
			rc, err := c.Submit(ctx, &Job{ID: id, Task: task})
			if err != nil {
				if errors.Is(err, ErrTooLarge) {
					t.Fatalf("a job of %d task bytes under the limit %d refused: %v", len(task), MaxJobBytesFor(nc), err)
				}
				t.Fatal(err)
			}
			evs := watchEvents(t, c, rc.ID)
			var types []string
			for _, ev := range evs {
				types = append(types, ev.Type)
				// As published (json.Marshal would escape the data again).
				if b, _ := EncodeNoEscape(ev); len(b) > maxPayload {
					t.Errorf("event %s is %d bytes", ev.Type, len(b))
				}
				if ref, ok := EventDataRef(ev); ok {
					full, err := c.EventData(ctx, ev)
					if err != nil || len(full) != ref.Bytes {
						t.Errorf("event %s: full data %d bytes (%v), ref says %d", ev.Type, len(full), err, ref.Bytes)
					}
				}
			}
			want := []string{EventStarted}
			for _, e := range tt.emits {
				want = append(want, e.typ)
			}
			want = append(want, "note", EventSucceeded)
			if strings.Join(types, " ") != strings.Join(want, " ") {
				t.Errorf("events %v, want %v", types, want)
			}
			if st := waitStatus(t, c, rc.ID); st.Status != StatusSucceeded {
				t.Errorf("status %s (%s)", st.Status, st.Error)
			}
		})
	}
}

func htmlJobID(name string) string {
	return strings.NewReplacer(" ", "-", "'", "", "<", "", ",", "").Replace("html-" + name)
}
