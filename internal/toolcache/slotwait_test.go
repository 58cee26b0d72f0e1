package toolcache

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A call waiting for a free slot (maxConcurrent) when its session breaks
// was never sent. It failed with ErrSessionLost, which says the tool may
// or may not have run, so the model took a call that never reached the
// server for one that crashed it; it is now sent on the next session. The
// call in flight still fails with ErrSessionLost.
func TestCallWaitingForASlotGoesToTheNextSession(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{SessionShared, SessionPerJob} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			cfg := stdioTestServer("slots")
			cfg.MaxConcurrent, cfg.SessionMode = 1, mode
			n := newNotes()
			waiting := make(chan string, 10)
			p := newTestPool(t, Config{Servers: map[string]ServerConfig{"slots": cfg}}, n.option(),
				func(o *options) { o.slotHook = func(name string) { waiting <- name } })
			v := newTestView(t, p, nil, nil, nil)
			pid1 := callPID(t, v, "pid")

			slow := make(chan error, 1)
			go func() {
				_, err := v.CallTool(context.Background(), "slow", json.RawMessage(`{"id":"s1"}`))
				slow <- err
			}()
			n.wait(t, "test/started", "s1")
			type answer struct {
				res Result
				err error
			}
			queued := make(chan answer, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				res, err := v.CallTool(ctx, "pid", nil)
				queued <- answer{res, err}
			}()
			select {
			case <-waiting:
			case <-time.After(30 * time.Second):
				t.Fatal("the second call never waited for a slot")
			}
			if err := syscall.Kill(pid1, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if err := <-slow; !errors.Is(err, ErrSessionLost) {
				t.Errorf("call in flight: %v, want ErrSessionLost", err)
			}
			a := <-queued
			if a.err != nil {
				t.Fatalf("queued call: %v, want it sent on the next session", a.err)
			}
			if pid2, _ := strconv.Atoi(a.res.Text); pid2 == pid1 || pid2 == 0 {
				t.Errorf("queued call answered %q, want the next server's pid (not %d)", a.res.Text, pid1)
			}
		})
	}
}
