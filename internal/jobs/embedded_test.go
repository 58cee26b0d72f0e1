package jobs

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestEmbeddedRefusesSharedStoreAndBusyPort: two embedded servers on one
// data directory would write over each other's JetStream files, so the
// second is refused while the first runs; a busy listen address fails at
// once and names the way to add a worker.
func TestEmbeddedRefusesSharedStoreAndBusyPort(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := StartEmbedded(EmbeddedConfig{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := StartEmbedded(EmbeddedConfig{DataDir: dir, Listen: "127.0.0.1:0"}); err == nil || !strings.Contains(err.Error(), "in use by another") {
		if s != nil {
			s.Shutdown()
			s.WaitForShutdown()
		}
		t.Errorf("second server on the same store: %v", err)
	}
	first.Shutdown()
	first.WaitForShutdown()
	again, err := StartEmbedded(EmbeddedConfig{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("the store is free again once the first server stopped: %v", err)
	}
	again.Shutdown()
	again.WaitForShutdown()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = StartEmbedded(EmbeddedConfig{DataDir: t.TempDir(), Listen: ln.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "NATS_URL=nats://"+ln.Addr().String()) {
		t.Errorf("busy port: %v", err)
	}
}

// TestLockDataDirWaitsForRelease: a lock released shortly after the start
// (as a server of this process that just shut down releases it) is taken
// within lockWait rather than refused.
func TestLockDataDirWaitsForRelease(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder, err := os.OpenFile(filepath.Join(dir, "jetagent.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := lockFile(holder); err != nil {
		t.Fatal(err)
	}
	release := time.AfterFunc(lockWait/10, func() { _ = holder.Close() })
	defer release.Stop()
	unlock, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock released during the wait: %v", err)
	}
	unlock()
}
