package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/natstest"
	"github.com/jetagent/jetagent/schemas"
)

// TestOversizedEventsAreOffloaded: an event whose data the server cannot
// carry (a tool.result with a large output) is not lost: its data goes to
// the transcript store, and the event carries a preview with a reference
// to it, which Client.EventData follows. Events stay valid against
// schemas/event.schema.json.
func TestOversizedEventsAreOffloaded(t *testing.T) {
	t.Parallel()
	const maxPayload = 32 << 10
	s := startSmallServer(t, maxPayload)
	nc := natstest.Connect(t, s)

	// Multi-byte characters, so a preview cut at a byte count must not
	// split one.
	output := strings.Repeat("résultat ", 12<<10) // ~120 KiB
	blob := strings.Repeat("b", 48<<10)
	huge := map[string]any{"call_id": "c1", "name": "add", "output": output, "duration_ms": 3,
		"rows": strings.Split(strings.Repeat("row,", 10<<10), ",")}
	emitted := make(chan error, 4)
	runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
		emitted <- env.Emit(ctx, "tool.result", 1, huge)
		emitted <- env.Emit(ctx, "blob", 1, blob)
		emitted <- env.Emit(ctx, "note", 1, map[string]string{"text": "small"})
		return &Outcome{Result: agentloop.Result{Answer: "done", Rounds: 1, StopReason: "final_answer",
			Messages: []llm.Message{{Role: llm.RoleUser, Content: job.Task}}}}, nil
	})
	startWorker(t, nc, Config{Runner: runner})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	rc, err := c.Submit(ctx, &Job{ID: "big-events", Task: "x"})
	if err != nil {
		t.Fatal(err)
	}
	evs := watchEvents(t, c, rc.ID)
	for range 3 {
		if err := <-emitted; err != nil {
			t.Errorf("Emit: %v", err)
		}
	}

	v, err := NewValidator(0)
	if err != nil {
		t.Fatal(err)
	}
	byType := map[string]Event{}
	for _, ev := range evs {
		byType[ev.Type] = ev
		b, _ := json.Marshal(ev)
		if err := v.Validate(schemas.Event, b); err != nil {
			t.Errorf("event %s: %v", ev.Type, err)
		}
		if len(b) > maxPayload {
			t.Errorf("event %s is %d bytes", ev.Type, len(b))
		}
	}
	// The schema holds the reduced form to its shape.
	bad := `{"job_id":"j","type":"tool.result","attempt":1,"seq":2,"time":"2026-01-02T03:04:05Z","data":{"truncated":true,"output":"x"}}`
	if err := v.Validate(schemas.Event, []byte(bad)); err == nil || !strings.Contains(err.Error(), "data_ref") {
		t.Errorf("truncated data without data_ref: %v", err)
	}
	// A tool output cut for the model is not a reduced event.
	cut := `{"job_id":"j","type":"tool.result","attempt":1,"seq":2,"time":"2026-01-02T03:04:05Z","data":{"truncated_for_model":true,"output":"x"}}`
	if err := v.Validate(schemas.Event, []byte(cut)); err != nil {
		t.Errorf("tool output cut for the model: %v", err)
	}
	if len(evs) != 5 {
		t.Fatalf("events %v", evs)
	}

	full := func(v any) []byte {
		b, _ := json.Marshal(v)
		return b
	}
	tests := []struct {
		typ  string
		full []byte
		// check looks at the published, reduced data.
		check func(t *testing.T, d map[string]any)
	}{
		{"tool.result", full(huge), func(t *testing.T, d map[string]any) {
			out, _ := d["output"].(string)
			if d["name"] != "add" || d["call_id"] != "c1" || d["duration_ms"] != 3.0 ||
				len(out) == 0 || len(out) > 4096 || !strings.HasPrefix(output, out) {
				t.Errorf("preview keeps the small fields and the output's start: %v", d)
			}
			if _, ok := d["rows"]; ok {
				t.Error("a large non-string field is kept")
			}
			if fmt.Sprint(d["truncated_fields"]) != "[output rows]" {
				t.Errorf("truncated_fields %v", d["truncated_fields"])
			}
		}},
		{"blob", full(blob), func(t *testing.T, d map[string]any) {
			if p, _ := d["preview"].(string); len(p) == 0 || !strings.HasPrefix(string(full(blob)), p) {
				t.Errorf("preview %q", d["preview"])
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			ev, ok := byType[tt.typ]
			if !ok {
				t.Fatal("event missing")
			}
			var d map[string]any
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			ref, _ := d["data_ref"].(map[string]any)
			wantName := fmt.Sprintf("%s.event.%d.%d", ev.JobID, ev.Attempt, ev.Seq)
			if d["truncated"] != true || ref["bucket"] != "AGENT_TRANSCRIPTS" || ref["name"] != wantName {
				t.Fatalf("data %.300s", ev.Data)
			}
			tt.check(t, d)
			got, err := c.EventData(ctx, ev)
			if err != nil {
				t.Fatal(err)
			}
			if ref["bytes"] != float64(len(got)) {
				t.Errorf("data_ref.bytes %v, data %d bytes", ref["bytes"], len(got))
			}
			if !bytes.Equal(got, tt.full) {
				t.Errorf("EventData: %d bytes, want the original %d", len(got), len(tt.full))
			}
		})
	}
	// A small event is published as it is.
	if d, err := c.EventData(ctx, byType["note"]); err != nil || string(d) != `{"text":"small"}` {
		t.Errorf("note: %s, %v", d, err)
	}
}

// TestStartPutObject: an object published by startPutObject (chunks and
// meta, asynchronously) reads back through the object store as nats.go
// wrote it, several chunks, digest and all; a second put of the name
// replaces it.
func TestStartPutObject(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	w, _ := startWorker(t, nc, Config{Runner: newTestRunner()})
	ctx := natstest.Context(t)
	data := make([]byte, 300<<10)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	for _, d := range [][]byte{data, []byte(`{"short":true}`)} {
		p, err := w.startPutObject("obj.raw", d)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.wait(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := w.topo.Transcripts.GetBytes(ctx, "obj.raw")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, d) {
			t.Fatalf("read back %d bytes, want %d", len(got), len(d))
		}
		info, err := w.topo.Transcripts.GetInfo(ctx, "obj.raw")
		if err != nil {
			t.Fatal(err)
		}
		if want := (len(d) + int(w.objectChunk()) - 1) / int(w.objectChunk()); int(info.Chunks) != want || info.Size != uint64(len(d)) || info.ModTime.IsZero() {
			t.Errorf("info %+v, want %d chunks", info, want)
		}
	}
}
