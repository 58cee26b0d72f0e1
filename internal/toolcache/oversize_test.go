package toolcache

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// An answer over the 64 MiB message bound (seen end to end: the reference
// filesystem server's read_text_file of a 34 MiB file, whose answer
// carries the text twice, escaped) broke the shared stdio session: the
// call failed "MCP session lost (the request may or may not have run)",
// so did every other job's call in flight on that session, and the server
// was restarted. The answer is now dropped and its call fails with the
// reason; the session, and the calls around it, go on.
func TestOversizedAnswerKeepsTheSession(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"huge", "hugelast"} {
		t.Run(text, func(t *testing.T) {
			t.Parallel()
			s := DefaultSettings()
			s.ConnectTimeout, s.HealthInterval = 30*time.Second, 0
			p := newTestPool(t, Config{Servers: map[string]ServerConfig{"srv": hostileServer("plain", nil)}},
				WithSettings(s), WithLogger(discardLogger()))
			before := statusOf(p, "srv")
			if before.State != StateReady {
				t.Fatalf("status %+v", before)
			}
			v := newTestView(t, p, nil, nil, nil)
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute) // 65 MiB through a pipe under -race and load
			defer cancel()
			// Another call in flight at the same time, as another job's
			// would be: its answer comes before or after the large one.
			other := make(chan error, 1)
			go func() {
				res, err := v.CallTool(ctx, "echo", json.RawMessage(`{"text":"other"}`))
				if err == nil && res.Text != "other" {
					err = errors.New("answered " + res.Text)
				}
				other <- err
			}()
			_, err := v.CallTool(ctx, "echo", json.RawMessage(`{"text":"`+text+`"}`))
			if err == nil || !strings.Contains(err.Error(), "larger than the client's bound of 64 MiB") || errors.Is(err, ErrSessionLost) {
				t.Fatalf("call: %v; want the bound named, the session kept", err)
			}
			if err := <-other; err != nil {
				t.Errorf("the other call: %v", err)
			}
			if res, err := v.CallTool(ctx, "echo", json.RawMessage(`{"text":"after"}`)); err != nil || res.Text != "after" {
				t.Errorf("the next call: %+v, %v", res, err)
			}
			if after := statusOf(p, "srv"); after.PID != before.PID || after.Connects != 1 || after.State != StateReady {
				t.Errorf("session replaced: before %+v, after %+v", before, after)
			}
		})
	}
}
