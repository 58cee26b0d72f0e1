package jobs

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// startSmallServer is startServer with a small max_payload.
func startSmallServer(t *testing.T, maxPayload int32) *server.Server {
	t.Helper()
	s, err := StartEmbedded(EmbeddedConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0", MaxPayload: maxPayload})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// TestMaxJobBytesFitsMaxPayload: a job size limit the server could not
// carry is refused at construction, naming both; the default shrinks to
// what it carries. A job of exactly the limit that is refused at the door
// still fits the dead-letter stream with the worker's headers.
func TestMaxJobBytesFitsMaxPayload(t *testing.T) {
	t.Parallel()
	const maxPayload = 64 << 10
	s := startSmallServer(t, maxPayload)
	nc := natstest.Connect(t, s)
	limit := MaxJobBytesFor(nc)
	if limit != maxPayload-JobHeaderRoom {
		t.Fatalf("MaxJobBytesFor = %d, want %d", limit, maxPayload-JobHeaderRoom)
	}

	_, err := NewWorker(Config{Conn: nc, Runner: newTestRunner(), MaxJobBytes: maxPayload})
	if !errors.Is(err, ErrConfig) || !errors.Is(err, ErrMaxPayload) ||
		!strings.Contains(err.Error(), "65536") || !strings.Contains(err.Error(), "max_payload") {
		t.Fatalf("limit at max_payload: %v", err)
	}
	if _, err := NewWorker(Config{Conn: nc, Runner: newTestRunner(), MaxJobBytes: limit}); err != nil {
		t.Fatalf("limit that fits: %v", err)
	}

	w, _ := startWorker(t, nc, Config{Runner: newTestRunner()})
	if got := w.v.MaxJobBytes(); got != limit {
		t.Fatalf("default limit %d, want it lowered to %d", got, limit)
	}

	// A schema-violating job of exactly the limit, with a long reason.
	ctx := natstest.Context(t)
	head, tail := `{"id":"big-bad","task":"x","tool_mode":"`, `"}`
	payload := head + strings.Repeat("f", limit-len(head)-len(tail)) + tail
	m := nats.NewMsg("agent.jobs.default")
	m.Data = []byte(payload)
	m.Header.Set(nats.MsgIdHdr, "big-bad")
	js, _ := jetstream.New(nc)
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatalf("a job of the limit cannot be published: %v", err)
	}
	c := newClient(t, nc)
	st := waitStatus(t, c, "big-bad")
	if st.Status != StatusDead {
		t.Fatalf("state %+v", st)
	}
	var found bool
	for _, dl := range streamMsgs(t, nc, c.names.DLQStream(), "") {
		found = found || (dl.Header.Get("Jetagent-Job-Id") == "big-bad" && string(dl.Data) == payload)
	}
	if !found {
		t.Fatal("no dead letter of the job")
	}
}
