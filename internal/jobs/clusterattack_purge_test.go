package jobs

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A finished job's journal purge whose request goes unanswered (a stream
// leader elected while it was in flight, seen on a cluster whose cut-off
// node came back; or a server killed as it took it) costs one try: the
// purge was one request bounded only by the whole 10 s, so the job's
// terminal event and ack waited for it, and the journal was left for the
// bucket's TTL (7 days) with "journal purge failed" in the log.
func TestJournalPurgeRequestLost(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	p := startDropProxy(t, s.Addr().String(), dropMatching("$JS.API.STREAM.PURGE.KV_AGENT_JOURNAL", false))
	nc, err := nats.Connect(p.url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w, _ := startWorker(t, nc, Config{Runner: newTestRunner()})
	e := &runEnv{w: w, jobID: "purged", attempt: 2, fenced: new(atomic.Bool)}
	ctx := natstest.Context(t)
	if err := e.Journal().Put(ctx, "c1.0", []byte(`{"kind":"intent"}`)); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	p.dropping.Store(true)
	start := time.Now()
	w.forgetProgressOf(context.Background(), e, slog.New(slog.NewTextHandler(&logs, nil)))
	took := time.Since(start)
	select {
	case <-p.dropped:
	default:
		t.Fatal("the purge request was not sent")
	}
	if strings.Contains(logs.String(), "failed") {
		t.Errorf("after %s: %s", took.Round(time.Millisecond), logs.String())
	}
	if _, err := w.topo.Journal.Get(ctx, journalKey("purged", "c1.0")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the journal entry is left: %v", err)
	}
	if took >= journalOpBound {
		t.Errorf("took %s, the whole bound", took)
	}
}

// A finished job's journal object whose delete request goes unanswered
// (as the purge's in TestJournalPurgeRequestLost) costs one try: the
// deletes had no bound of their own, so that one spent the whole 10 s
// shared with the other deletes and the journal purge, which then failed
// too: the objects and the journal were left, "journal purge failed"
// logged, the job's terminal event and ack held for 10 s.
func TestJournalObjectDeleteRequestLost(t *testing.T) {
	t.Parallel()
	s, err := StartEmbedded(EmbeddedConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0", MaxPayload: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	p := startDropProxy(t, s.Addr().String(), dropMatching("$JS.API.STREAM.PURGE.OBJ_AGENT_TRANSCRIPTS", false))
	nc, err := nats.Connect(p.url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w, _ := startWorker(t, nc, Config{Runner: newTestRunner()})
	e := &runEnv{w: w, jobID: "objects", attempt: 2, fenced: new(atomic.Bool)}
	ctx := natstest.Context(t)
	long := bytes.Repeat([]byte("x"), 100<<10) // over the payload: stored as an object
	if err := e.Journal().Put(ctx, "c1.0", long); err != nil {
		t.Fatal(err)
	}
	object := JournalObjectName("objects", "c1.0")
	if _, err := w.topo.Transcripts.GetInfo(ctx, object); err != nil {
		t.Fatalf("the long entry is not an object: %v", err)
	}
	var logs syncBuffer
	p.dropping.Store(true)
	w.forgetProgressOf(context.Background(), e, slog.New(slog.NewTextHandler(&logs, nil)))
	select {
	case <-p.dropped:
	default:
		t.Fatal("the delete's request was not sent")
	}
	if strings.Contains(logs.String(), "failed") {
		t.Errorf("logged: %s", logs.String())
	}
	if _, err := w.topo.Transcripts.GetInfo(ctx, object); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("the object is left: %v", err)
	}
	if _, err := w.topo.Journal.Get(ctx, journalKey("objects", "c1.0")); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the journal entry is left: %v", err)
	}
}
