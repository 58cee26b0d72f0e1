package toolcache

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCallTimeoutNamed: a call cut by its server's callTimeout said only
// "context deadline exceeded" (seen end to end with bin/worker: the model
// read 'toolcache: call long: server "raw": tools/call: context deadline
// exceeded'); the error now names the limit, and still is a deadline. A
// caller's own deadline is not blamed on callTimeout.
func TestCallTimeoutNamed(t *testing.T) {
	t.Parallel()
	p := newTestPool(t, Config{}, WithInProcessServer("srv", newTestMCPServer("srv"),
		ServerConfig{CallTimeout: Duration(300 * time.Millisecond)}))
	v := newTestView(t, p, nil, nil, nil)
	cases := []struct {
		name     string
		deadline time.Duration // the caller's
		named    bool
	}{
		{"callTimeout", 30 * time.Second, true},
		{"caller's deadline", 50 * time.Millisecond, false},
	}
	for i, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), tc.deadline)
		args, _ := json.Marshal(map[string]string{"id": strconv.Itoa(i)})
		_, err := v.CallTool(ctx, "slow", args)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: err = %v, want a deadline", tc.name, err)
			continue
		}
		if got := strings.Contains(err.Error(), "no answer within the server's callTimeout of 300ms"); got != tc.named {
			t.Errorf("%s: err = %v; callTimeout named: %v, want %v", tc.name, err, got, tc.named)
		}
	}
}
