package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/jobs"
)

// TestFormatEventRounds: an event of a round says which; loop.outcome,
// whose Round is the number of completed tool rounds, printed "round 1:"
// after a job's second round. tool.clash was printed as raw JSON.
func TestFormatEventRounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ev         jobs.Event
		want, lack string
	}{
		{jobs.Event{Type: "llm.request", Round: 2, Data: json.RawMessage(`{"message_count":3,"tool_count":7,"tool_def_tokens":571,"mode":"full"}`)},
			"llm.request      round 2: asking the model (3 messages, 7 tools = 571 tokens, full mode)", ""},
		{jobs.Event{Type: "loop.outcome", Round: 1, Data: json.RawMessage(`{"stop_reason":"final_answer","rounds":1,"prompt_tokens":842,"completion_tokens":65}`)},
			"loop.outcome     final_answer after 1 tool rounds, 842 prompt + 65 completion tokens", "round 1:"},
		{jobs.Event{Type: "tool.clash", Data: json.RawMessage(`{"name":"add","server":"example","winner":"server"}`)},
			"tool.clash       add: example's tool is used, the client tool of that name is left out", "{"},
		{jobs.Event{Type: "tool.progress", Round: 1, Data: json.RawMessage(`{"call_id":"c1","name":"crawl","tool":"crawl","progress":2,"total":3,"message":"page\n2"}`)},
			"tool.progress    round 1: crawl: 2/3 page 2", "{"},
		{jobs.Event{Type: "context.compacted", Round: 3, Data: json.RawMessage(`{"retry":0,"level":1,"cut_outputs":2,"cut_bytes":11488,"error":"This model's maximum context length is 4096 tokens."}`)},
			"context.compacted round 3: the model's context window was full: 2 tool outputs cut (11488 bytes; level 1)", "{"},
		{jobs.Event{Type: "loop.outcome", Data: json.RawMessage(`{"stop_reason":"final_answer","rounds":0,"prompt_tokens":9,"completion_tokens":1}`)},
			"loop.outcome     final_answer after 0 tool rounds", "round 0:"},
		// A tool's output with a terminal sequence (clear the screen, set
		// the title) is not sent to the terminal as one.
		{jobs.Event{Type: "tool.result", Round: 1, Data: json.RawMessage(`{"name":"cat","output":"ok\u001b[2J\u001b]0;owned\u0007 \u009b6n","duration_ms":3}`)},
			"cat → ok\uFFFD[2J\uFFFD]0;owned\uFFFD \uFFFD6n", "\x1b"},
	} {
		t.Run(tc.ev.Type, func(t *testing.T) {
			t.Parallel()
			tc.ev.Time = time.Now()
			got := formatEvent(tc.ev)
			if !strings.Contains(got, tc.want) || (tc.lack != "" && strings.Contains(got, tc.lack)) {
				t.Errorf("got %q\nwant %q without %q", got, tc.want, tc.lack)
			}
		})
	}
}
