package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/nats-io/nats.go/jetstream"
)

// An event's data that would not fit the server's max_payload is stored in
// the transcript bucket as <job_id>.event.<attempt>.<seq>, and the event is
// published with a reduced data instead (schemas/event.schema.json):
//
//   - data that is a JSON object keeps its fields, each string longer than
//     PreviewBytes cut to its first PreviewBytes (at a character boundary),
//     other large values left out, plus "truncated": true, "data_ref" and
//     "truncated_fields" (the names cut or left out). Readers of the usual
//     fields (submit's tool.result line) thus keep working on the preview.
//   - any other data, or an object still too large, becomes
//     {"truncated": true, "data_ref": ..., "preview": "<start of its JSON>"}.
//
// Client.EventData reads the full data back.

// PreviewBytes is how much of an oversized field an event keeps.
const PreviewBytes = 4096

// eventRoom is what an event leaves of max_payload for everything but its
// data: the Nats-Msg-Id header and the envelope (job id, type, worker, time).
const eventRoom = 2048

// DataRef points at an event's full data in an object store bucket.
type DataRef struct {
	Bucket string `json:"bucket"`
	Name   string `json:"name"`
	Bytes  int    `json:"bytes"`
}

// EventDataName is the object name of the full data of a job's event.
func EventDataName(jobID string, attempt, seq int) string {
	return fmt.Sprintf("%s.event.%d.%d", jobID, attempt, seq)
}

// EventDataRef returns the reference of an event published with reduced
// data, and whether it is one.
func EventDataRef(ev Event) (DataRef, bool) {
	var probe struct {
		Truncated bool     `json:"truncated"`
		Ref       *DataRef `json:"data_ref"`
	}
	if len(ev.Data) == 0 || ev.Data[0] != '{' || json.Unmarshal(ev.Data, &probe) != nil ||
		!probe.Truncated || probe.Ref == nil || probe.Ref.Name == "" {
		return DataRef{}, false
	}
	return *probe.Ref, true
}

// payloadBudget is the most a message body may hold on this connection
// (event data, an encoded state, an object chunk): max_payload less room
// for the subject and headers the publish adds.
func (w *Worker) payloadBudget() int {
	return int(w.cfg.Conn.MaxPayload()) - eventRoom
}

// offloadEventData stores ev's data and returns the reduced form to
// publish in its place.
func (w *Worker) offloadEventData(ctx context.Context, ev Event, budget int) (json.RawMessage, error) {
	name := EventDataName(ev.JobID, ev.Attempt, ev.Seq)
	if err := w.putObject(ctx, name, ev.Data); err != nil {
		return nil, fmt.Errorf("event %s of %s is %d bytes, over the server's max_payload, and storing it failed: %w",
			ev.Type, ev.JobID, len(ev.Data), err)
	}
	ref := DataRef{Bucket: w.names.TranscriptBucket(), Name: name, Bytes: len(ev.Data)}
	return reduceData(ev.Data, ref, budget)
}

// reduceData is data cut to a preview with ref (see the comment above).
func reduceData(data json.RawMessage, ref DataRef, budget int) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(data, &obj) == nil && obj != nil {
		var cut []string
		for k, v := range obj {
			if len(v) <= PreviewBytes {
				continue
			}
			cut = append(cut, k)
			var s string
			if json.Unmarshal(v, &s) == nil {
				obj[k] = marshalNoEscape(cutUTF8(s, PreviewBytes))
			} else {
				delete(obj, k)
			}
		}
		sort.Strings(cut)
		obj["truncated"] = json.RawMessage("true")
		obj["data_ref"] = marshalNoEscape(ref)
		obj["truncated_fields"] = marshalNoEscape(cut)
		if b := marshalNoEscape(obj); len(b) <= budget {
			return b, nil
		}
	}
	// JSON text needs up to 2 bytes per byte as a string (\" and \\).
	preview := cutUTF8(string(data), min(PreviewBytes, budget/4))
	b := marshalNoEscape(map[string]any{"truncated": true, "data_ref": ref, "preview": preview})
	if len(b) > budget {
		return nil, fmt.Errorf("event data reference of %d bytes exceeds the budget of %d", len(b), budget)
	}
	return b, nil
}

// marshalNoEscape is json.Marshal without HTML escaping (which would let a
// preview grow sixfold) and without the trailing newline.
func marshalNoEscape(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only strings, refs and raw JSON reach here
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// objectChunk is the chunk size of objects this worker stores: the object
// store's default (128 KiB) unless the server carries less.
func (w *Worker) objectChunk() uint32 {
	return uint32(max(1024, min(128<<10, w.payloadBudget())))
}

// putObject stores data under name in the transcript bucket, in chunks the
// server can carry.
func (w *Worker) putObject(ctx context.Context, name string, data []byte) error {
	_, err := w.topo.Transcripts.Put(ctx, jetstream.ObjectMeta{
		Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: w.objectChunk()},
	}, bytes.NewReader(data))
	return err
}
