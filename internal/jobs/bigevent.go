package jobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
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

// eventBudget is payloadBudget for an event's data, lowered to the
// events stream's max_msg_size (an operator's setting, read at start and
// at every asset look) less the same room: an event over it was refused
// by the stream, and only a preview with a reference goes through. A
// max_msg_size too small for a preview leaves it as it is (the events the
// stream refuses are then reported by an events.gap event).
func (w *Worker) eventBudget() int {
	b := w.payloadBudget()
	if m := int(w.eventsMaxMsg.Load()); m > 0 && m-eventRoom >= minEventBudget {
		b = min(b, m-eventRoom)
	}
	return b
}

// minEventBudget is the least data budget a preview with its reference
// fits in.
const minEventBudget = 1024

// followEventsLimit reads the events stream's max_msg_size.
func (w *Worker) followEventsLimit(ctx context.Context) {
	ictx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	if info, err := w.topo.Events.Info(ictx); err == nil {
		w.eventsMaxMsg.Store(int64(info.Config.MaxMsgSize))
	}
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
	b, err := EncodeNoEscape(v)
	if err != nil {
		panic(err) // only strings, refs and raw JSON reach here
	}
	return b
}

// EncodeNoEscape is json.Marshal without HTML escaping, also of the
// json.RawMessage values within v, and without the trailing newline: what
// is measured against a size limit is then what is published (the worker,
// Client and submit measure jobs so).
func EncodeNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// objectChunk is the chunk size of objects this worker stores: the object
// store's default (128 KiB) unless the server carries less.
func (w *Worker) objectChunk() uint32 {
	return uint32(max(1024, min(128<<10, w.payloadBudget())))
}

// putObject stores data under name in the transcript bucket, in chunks the
// server can carry.
// Each try is bounded and tried again within objectOpBound (and ctx): a
// stream that has no leader for a moment (a cluster node restarted: "no
// response from stream") or a request a restarted server swallowed used
// to fail the one try, and a job then ended without its transcript.
func (w *Worker) putObject(ctx context.Context, name string, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, objectOpBound)
	defer cancel()
	var last error
	op := func() error {
		tctx, cancel := context.WithTimeout(ctx, objectTryTimeout(len(data)))
		defer cancel()
		_, err := w.topo.Transcripts.Put(tctx, jetstream.ObjectMeta{
			Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: w.objectChunk()},
		}, bytes.NewReader(data))
		if err == nil {
			return nil
		}
		last = err
		if errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrMaxPayload) {
			return backoff.Permanent(err) // no other try would do better
		}
		return err
	}
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = 100*time.Millisecond, time.Second
	if err := backoff.Retry(op, backoff.WithContext(b, ctx)); err != nil {
		if last != nil {
			return last // the server's reason, not the bound's
		}
		return err
	}
	return nil
}

// objectOpBound bounds storing one object, its tries included.
const objectOpBound = 10 * time.Second

// objectTryTimeout bounds one try at storing an object of n bytes: a
// state write's try, and a second more for each 256 KiB.
func objectTryTimeout(n int) time.Duration {
	return stateTryTimeout + time.Duration(n>>18)*time.Second
}

// objectPut is an object on its way into the transcript bucket.
type objectPut struct {
	name string
	futs []jetstream.PubAckFuture
}

// startPutObject stores data as the object name of the transcript bucket
// in the object store's own layout (chunks on $O.<bucket>.C.<id>, then the
// meta message on $O.<bucket>.M.<base64url name> with a subject rollup),
// read back by any object-store client, but published asynchronously on
// the worker's JetStream context: no metadata read first and no reply
// subscription of its own, as nats.go's ObjectStore.Put has, so storing
// costs the one round trip of awaiting its acks (wait), which can be shared
// with others. Unlike Put it leaves the chunks of an earlier object of the
// same name in place (the meta's rollup replaces its metadata): for names
// written once, such as a job's transcripts on its first attempt.
func (w *Worker) startPutObject(name string, data []byte) (*objectPut, error) {
	bucket := w.names.TranscriptBucket()
	id := ulid.Make().String()
	chunkSubj := "$O." + bucket + ".C." + id
	size := int(w.objectChunk())
	p := &objectPut{name: name}
	h := sha256.New()
	chunks := 0
	for off := 0; off < len(data); off += size {
		part := data[off:min(off+size, len(data))]
		h.Write(part)
		fut, err := w.topo.JS.PublishMsgAsync(&nats.Msg{Subject: chunkSubj, Data: part})
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", name, err)
		}
		p.futs = append(p.futs, fut)
		chunks++
	}
	info := jetstream.ObjectInfo{
		ObjectMeta: jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: uint32(size)}},
		Bucket:     bucket, NUID: id, Size: uint64(len(data)), Chunks: uint32(chunks),
		Digest: jetstream.GetObjectDigestValue(h),
	}
	meta, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	mm := nats.NewMsg("$O." + bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name)))
	mm.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	mm.Data = meta
	fut, err := w.topo.JS.PublishMsgAsync(mm)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", name, err)
	}
	p.futs = append(p.futs, fut)
	return p, nil
}

// wait returns once the server has stored every part of the object.
func (p *objectPut) wait(ctx context.Context) error {
	for _, f := range p.futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("store %s: %w", p.name, err)
		case <-ctx.Done():
			return fmt.Errorf("store %s: %w", p.name, errors.Join(ctx.Err(), nats.ErrTimeout))
		}
	}
	return nil
}
