package toolcache

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/cfgerr"
)

// Health checks: a few unanswered pings are allowed, a server that answers
// other requests or sends notifications is never replaced for missing its
// pings, and a silent one is replaced after HealthMisses in a row.
func TestHealthCheckMisses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		drop   string // dropPingsEnv
		misses int    // HealthMisses
		check  func(t *testing.T, p *Pool, v *View, h healthEvents)
		// interval is HealthInterval (default 150 ms).
		interval time.Duration
	}{
		{"a few misses are allowed", "2", 4, func(t *testing.T, p *Pool, v *View, h healthEvents) {
			counted := 0
			h.waitUntil(t, "answered after the dropped pings", func(ev healthEvent) bool {
				if ev.Killed {
					t.Fatalf("session killed after %d misses (limit 4)", ev.Misses)
				}
				if ev.Counted {
					counted++
				}
				return ev.Err == nil && counted >= 2
			})
			if st := p.Status()[0]; st.Connects != 1 || st.State != StateReady {
				t.Errorf("status = %+v, want the first session still ready", st)
			}
		}, 0},
		{"a server answering a call is kept", "all", 2, func(t *testing.T, p *Pool, v *View, h healthEvents) {
			pid := p.Status()[0].PID
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := v.CallTool(ctx, "ticker", json.RawMessage(`{"id":"t"}`))
				done <- err
			}()
			// Wait for the call's first notification before counting checks.
			h.waitUntil(t, "that heard the ticking call", func(ev healthEvent) bool {
				return ev.Err != nil && !ev.Counted
			})
			uncounted := 0
			h.waitUntil(t, "unanswered 4 times while the call ticks", func(ev healthEvent) bool {
				if ev.Killed || ev.Counted {
					t.Fatalf("a miss counted while the server was sending notifications: %+v", ev)
				}
				uncounted++
				return uncounted >= 4
			})
			if got := callPID(t, v, "pid"); got != pid {
				t.Errorf("pid %d -> %d: the session was replaced", pid, got)
			}
			// Once the call ends, nothing answers for the server: replaced.
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("ticker call = %v", err)
			}
			h.waitUntil(t, "that killed the silent session", func(ev healthEvent) bool { return ev.Killed })
		},
			// A check counts a miss when the interval saw nothing from the
			// server: at 150 ms, a loaded machine stalling the server or
			// the client's reader that long (notifications come every
			// 20 ms) failed the case.
			time.Second},
		{"a silent server is replaced", "all", 3, func(t *testing.T, p *Pool, v *View, h healthEvents) {
			pid := p.Status()[0].PID
			var seen []int
			ev := h.waitUntil(t, "that killed the session", func(ev healthEvent) bool {
				if ev.Counted {
					seen = append(seen, ev.Misses)
				}
				return ev.Killed
			})
			if ev.Misses != 3 || len(seen) != 3 || seen[0] != 1 || seen[1] != 2 {
				t.Errorf("killed at misses %d after %v, want 1, 2, 3", ev.Misses, seen)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for {
				res, err := v.CallTool(ctx, "pid", nil)
				if errors.Is(err, ErrSessionLost) {
					continue // reached the session being replaced
				}
				if err != nil {
					t.Fatal(err)
				}
				if res.Text == strconv.Itoa(pid) {
					t.Fatalf("old process %d still answers", pid)
				}
				break
			}
		}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := stdioTestServer("pings")
			cfg.Env[dropPingsEnv] = tc.drop
			h := newHealthEvents()
			s := DefaultSettings()
			s.HealthInterval, s.HealthMisses = cmp.Or(tc.interval, 150*time.Millisecond), tc.misses
			p := newTestPool(t, Config{Servers: map[string]ServerConfig{"pings": cfg}}, WithSettings(s), h.option())
			tc.check(t, p, newTestView(t, p, nil, nil, nil), h)
		})
	}
}

// A server that speaks only the sessionless protocol 2026-07-28 is reached
// through "protocol": "2026-07-28", and only so; a server speaking both
// versions can be asked for it too.
func TestSessionlessProtocol(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		setup     func(t *testing.T, w *serverWatch) (ServerConfig, *atomic.Int64, []Option)
		wantReady bool
	}{
		{"2026-07-28-only http server with the field", func(t *testing.T, w *serverWatch) (ServerConfig, *atomic.Int64, []Option) {
			url, refused := sessionlessTestServer(t, w)
			return ServerConfig{URL: url, Protocol: ProtocolSessionless}, refused, nil
		}, true},
		{"2026-07-28-only http server without it", func(t *testing.T, w *serverWatch) (ServerConfig, *atomic.Int64, []Option) {
			url, refused := sessionlessTestServer(t, w)
			return ServerConfig{URL: url}, refused, nil
		}, false},
		{"stdio server with the field", func(t *testing.T, w *serverWatch) (ServerConfig, *atomic.Int64, []Option) {
			cfg := stdioTestServer("both")
			cfg.Protocol = ProtocolSessionless
			return cfg, nil, []Option{w.option()}
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newServerWatch()
			cfg, refused, opts := tc.setup(t, w)
			h := newHealthEvents()
			opts = append(opts, WithBackoff(time.Hour, time.Hour), WithHealthInterval(100*time.Millisecond), h.option())
			p := newTestPool(t, Config{Servers: map[string]ServerConfig{"gw": cfg}}, opts...)
			st := p.Status()[0]
			if !tc.wantReady {
				if st.State != StateFailed || st.Error == "" || refused.Load() == 0 {
					t.Fatalf("status = %+v (refused %d), want a failed handshake the server refused", st, refused.Load())
				}
				t.Logf("without the field: %s", st.Error)
				return
			}
			if st.State != StateReady || st.Protocol != "2026-07-28" || st.ServerName == "" {
				t.Fatalf("status = %+v, want ready on 2026-07-28", st)
			}
			v := newTestView(t, p, nil, nil, nil)
			if got := call(t, v, "echo", map[string]any{"text": "sessionless"}).Text; got != "sessionless" {
				t.Errorf("echo = %q", got)
			}
			if tool, _ := p.Registry().Get("echo"); !strings.Contains(string(tool.InputSchema), `"text to echo"`) {
				t.Errorf("echo schema = %s", tool.InputSchema)
			}
			// Health checks (server/discover on this protocol) are answered.
			h.waitUntil(t, "answered", func(ev healthEvent) bool { return ev.Err == nil })

			// notifications/tools/list_changed arrives on subscriptions/listen.
			changed := make(chan struct{}, 10)
			p.Registry().OnChange(func() { changed <- struct{}{} })
			call(t, v, "add_tool", map[string]any{"name": "late_tool"})
			deadline := time.After(30 * time.Second)
			for !p.Registry().Has("late_tool") {
				select {
				case <-changed:
				case <-deadline:
					t.Fatalf("late_tool not in the registry 30s after list_changed: %v", p.Registry().Names())
				}
			}

			// Cancelling a call ends the server's handler.
			ctx, cancel := context.WithCancel(context.Background())
			errc := make(chan error, 1)
			go func() {
				_, err := v.CallTool(ctx, "slow", json.RawMessage(`{"id":"s1"}`))
				errc <- err
			}()
			w.waitStarted(t, "s1")
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled call = %v", err)
			}
			w.waitCancelled(t, "s1")
			call(t, v, "echo", map[string]any{"text": "still fine"})
			if refused != nil && refused.Load() != 0 {
				t.Errorf("the server refused %d requests of a 2026-07-28 session", refused.Load())
			}
			if st := p.Status()[0]; st.Connects != 1 {
				t.Errorf("connects = %d, want 1", st.Connects)
			}
		})
	}
}

// A connect timeout is reported as both ErrServerUnavailable and
// context.DeadlineExceeded, with the package prefix once.
func TestConnectTimeoutWrapsDeadline(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{SessionShared, SessionPerJob} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			// Never answers initialize.
			cfg := ServerConfig{Command: "sh", Args: []string{"-c", "exec sleep 60"}, SessionMode: mode}
			p := newTestPool(t, Config{Servers: map[string]ServerConfig{"mute": cfg}},
				WithConnectTimeout(300*time.Millisecond), WithBackoff(time.Hour, time.Hour))
			if st := p.Status()[0]; st.State != StateFailed {
				t.Fatalf("status = %+v", st)
			}
			v := newTestView(t, p, nil, nil, nil)
			_, err := v.ListResources(context.Background())
			if !errors.Is(err, ErrServerUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want ErrServerUnavailable and context.DeadlineExceeded", err)
			}
			// Whose limit it was: mcp-go's "context deadline exceeded" does not say.
			if msg := err.Error(); !strings.Contains(msg, "no answer within the connect timeout 300ms") {
				t.Errorf("message %q does not name the connect timeout", msg)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "toolcache: ") || strings.Count(msg, "toolcache:") != 1 {
				t.Errorf("message %q: want the prefix once", msg)
			}
			t.Logf("%s: %v", mode, err)
		})
	}
}

// Invalid settings are refused at NewPool with a cfgerr.FieldError naming the
// field.
func TestSettingsValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		set  func(*Settings)
		want string
	}{
		{"connect timeout", func(s *Settings) { s.ConnectTimeout = 0 }, "ConnectTimeout"},
		{"health interval", func(s *Settings) { s.HealthInterval = -time.Second }, "HealthInterval"},
		{"health misses", func(s *Settings) { s.HealthMisses = 0 }, "HealthMisses"},
		{"resync interval", func(s *Settings) { s.ResyncInterval = -1 }, "ResyncInterval"},
		// A check waits at most the interval: 1ns failed every ping.
		{"health interval under a second", func(s *Settings) { s.HealthInterval = time.Nanosecond }, "HealthInterval"},
		{"health interval just under a second", func(s *Settings) { s.HealthInterval = 999 * time.Millisecond }, "HealthInterval"},
		{"resync interval under a second", func(s *Settings) { s.ResyncInterval = time.Millisecond }, "ResyncInterval"},
		{"backoff initial", func(s *Settings) { s.BackoffInitial = 0 }, "BackoffInitial"},
		{"backoff max", func(s *Settings) { s.BackoffMax = time.Millisecond }, "BackoffMax"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := DefaultSettings()
			tc.set(&s)
			_, err := NewPool(t.Context(), Config{}, WithSettings(s))
			fe, ok := cfgerr.As(err)
			if !ok || fe.Fields[0] != tc.want || !errors.Is(err, ErrConfig) ||
				!strings.HasPrefix(err.Error(), "toolcache: invalid configuration: "+tc.want+" must ") {
				t.Fatalf("err = %v, want a FieldError naming %s", err, tc.want)
			}
		})
	}
	if err := DefaultSettings().Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
	s := DefaultSettings()
	s.HealthInterval, s.ResyncInterval = MinInterval, MinInterval
	if err := s.Validate(); err != nil {
		t.Errorf("intervals of MinInterval refused: %v", err)
	}
	s.HealthInterval = time.Nanosecond
	if err, want := s.Validate(), "toolcache: invalid configuration: HealthInterval must be 0 (off) or at least 1s (got 1ns)"; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}
