package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/jobs"
)

// TestDataDirInsideAStoreRefused: JETAGENT_DATA_DIR set to the jetstream
// directory inside a store (where its files are) was taken; nats-server
// read it as its layout before 2.2.3 and moved the store's accounts one
// level down (jetstream/jetstream/$G): a worker started again on the right
// directory found an empty store, every job's state gone ("job not
// found"), and two workers could run on the one store (their lock files
// differ). It is refused, naming the directory to give, and nothing moves.
// A store's own directory and a new one are taken. Not parallel: the
// worker reads the process's environment.
func TestDataDirInsideAStoreRefused(t *testing.T) {
	store := filepath.Join(t.TempDir(), "jetagent-data")
	makeStore(t, store)
	for _, tc := range []struct {
		name, dir string
		refused   bool
	}{
		{"the store", store, false},
		{"a new directory", filepath.Join(t.TempDir(), "new"), false},
		{"the jetstream directory inside the store", filepath.Join(store, "jetstream"), true},
		{"the same with a trailing slash", filepath.Join(store, "jetstream") + "/", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
			t.Setenv("OPENAI_API_KEY", "")
			t.Setenv("NATS_URL", "")
			t.Setenv("JETAGENT_LISTEN", "127.0.0.1:0")
			t.Setenv("JETAGENT_DATA_DIR", tc.dir)
			s, err := loadSettings()
			switch {
			case !tc.refused && err != nil:
				t.Fatal(err)
			case tc.refused && err == nil:
				t.Errorf("taken")
			case tc.refused && (!strings.Contains(err.Error(), "invalid JETAGENT_DATA_DIR") || !strings.Contains(err.Error(), "("+store+")")):
				t.Errorf("refused with %q, want JETAGENT_DATA_DIR named and %s advised", err, store)
			}
			if err == nil {
				_, nc := startServe(t, s) // stopped when the subtest ends
				if !streamExists(t, nc, tc.dir != store) {
					t.Errorf("the worker on %s does not find its stream", tc.dir)
				}
			}
			// The store is where it was, for a worker on its directory.
			if _, err := os.Stat(filepath.Join(store, "jetstream", "$G", "streams", "KEEP")); err != nil {
				t.Errorf("the store moved: %v", err)
			}
		})
	}
}

// makeStore leaves at dir the store of an embedded server that had one
// stream, KEEP.
func makeStore(t *testing.T, dir string) {
	t.Helper()
	ns, err := jobs.StartEmbedded(jobs.EmbeddedConfig{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	nc, err := jobs.ConnectEmbedded(ns, jobs.EmbeddedConfig{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if !streamExists(t, nc, true) {
		t.Fatal("KEEP not created")
	}
}

// streamExists reports whether the server of nc has the stream KEEP,
// creating it first when create is set.
func streamExists(t *testing.T, nc *nats.Conn, create bool) bool {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if create {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "KEEP", Subjects: []string{"keep"}}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = js.Stream(ctx, "KEEP")
	return err == nil
}
