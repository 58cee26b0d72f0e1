package codemode

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// Clock reads and random values are bounded per execution like tool
// calls: the agent loop journals each durably, and a loop on Date.now()
// (a busy wait: code mode has no timers) or Math.random() wrote entries
// until the wall time, thousands a second.
func TestClockAndRandomValuesBounded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		code   string
		max    int
		wantOK string // Output.Text when the code stays within the limit
		reads  int    // Host.Now and Host.Random calls
	}{
		{"clock loop", `for (;;) Date.now()`, 50, "", 50},
		{"random loop", `for (;;) Math.random()`, 50, "", 50},
		{"new Date loop, caught", `for (;;) { try { new Date() } catch (e) {} }`, 7, "", 7},
		{"both count", `for (let i = 0; ; i++) i % 2 ? Date.now() : Math.random()`, 10, "", 10},
		{"within the limit", `[Date.now(), Math.random(), Date.now()].length`, 3, "3", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cat, h := echoTools()
			out := cat.Run(context.Background(), tt.code, h, Limits{MaxValues: tt.max})
			h.mu.Lock()
			reads := len(h.nows) + len(h.rands)
			h.mu.Unlock()
			if reads != tt.reads {
				t.Errorf("%d reads, want %d", reads, tt.reads)
			}
			if tt.wantOK != "" {
				if out.Err != nil || out.Text != tt.wantOK {
					t.Fatalf("Text %q, Err %v", out.Text, out.Err)
				}
				return
			}
			var le *LimitError
			if !errors.As(out.Err, &le) || le.Limit != "clock and random values" || !strings.Contains(le.Message, "code mode has no timers") {
				t.Fatalf("Err = %v, want the clock and random values limit", out.Err)
			}
		})
	}
}
