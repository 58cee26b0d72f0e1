package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/jobs"
)

// TestFormatEventLargeNumbers: counts and durations of a million or more
// are printed as written. The event's numbers were decoded as float64 and
// printed with %v, so a 5 MB answer read 'stop, 137+1.25e+06 tokens' (seen
// end to end with bin/worker and submit), a 20-minute retry delay
// 'again in 1.2e+06ms'.
func TestFormatEventLargeNumbers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		typ, data, want string
	}{
		{"llm.response", `{"finish_reason":"stop","prompt_tokens":137,"completion_tokens":1250000}`, "stop, 137+1250000 tokens"},
		{"llm.request", `{"message_count":1000000,"tool_count":3,"tool_def_tokens":20000000,"mode":"full"}`,
			"(1000000 messages, 3 tools = 20000000 tokens, full mode)"},
		{"loop.outcome", `{"stop_reason":"final_answer","rounds":2,"prompt_tokens":3000000,"completion_tokens":10000000}`,
			"final_answer after 2 tool rounds, 3000000 prompt + 10000000 completion tokens"},
		{"tool.result", `{"name":"slow","output":"ok","duration_ms":1000000}`, "slow → ok (1000000ms)"},
		{"retry", `{"reason":"model unavailable","delay_ms":1200000}`, "model unavailable; again in 1200000ms"},
		{"tool.result", `{"name":"fast","output":"ok","duration_ms":0.5}`, "fast → ok (0.5ms)"},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			t.Parallel()
			got := formatEvent(jobs.Event{Type: tc.typ, Round: 1, Time: time.Now(), Data: json.RawMessage(tc.data)})
			if !strings.Contains(got, tc.want) {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}
