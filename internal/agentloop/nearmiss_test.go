package agentloop_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// The seed's sample, for the test server's get_weather.
const seedLike = "leton\n{{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lima\"}}}\n</tool_call>"

// A near-miss call is recovered, runs, and the event says how it was read;
// an answer that only looks like a failed call is asked again once,
// ephemerally, and fails the job when the reply to that is debris too.
func TestNearMissCallsInTheLoop(t *testing.T) {
	t.Parallel()
	debris := "{\"name\": \"get_weather\", \"arguments\": {\"city\": Lima}}\n</tool_call>"
	for _, tc := range []struct {
		name        string
		cfg         agentloop.Config
		replies     []llmtest.Reply
		wantAnswer  string
		wantErr     error
		wantCalls   int64
		wantReasks  int
		wantRecover string // shape of the recovered call
	}{
		{"seed sample recovered", agentloop.Config{}, []llmtest.Reply{textReply(seedLike), textReply("Sunny.")}, "Sunny.", nil, 1, 0, "json"},
		{"pythonic recovered", agentloop.Config{}, []llmtest.Reply{textReply(`[get_weather(city="Lima")]`), textReply("Sunny.")}, "Sunny.", nil, 1, 0, "python"},
		{"debris, re-ask, call", agentloop.Config{}, []llmtest.Reply{textReply(debris), toolReply(call("get_weather", `{"city":"Lima"}`)), textReply("Sunny.")}, "Sunny.", nil, 1, 1, ""},
		{"debris, re-ask, answer", agentloop.Config{}, []llmtest.Reply{textReply(debris), textReply("I cannot tell.")}, "I cannot tell.", nil, 0, 1, ""},
		{"debris twice fails", agentloop.Config{}, []llmtest.Reply{textReply(debris), textReply(`get_weather("Lima")`)}, "", agentloop.ErrMalformedCall, 0, 1, ""},
		{"invalid after the retry: dropped, re-asked", agentloop.Config{}, []llmtest.Reply{
			textReply(`{'name': 'get_weather', 'arguments': {'town': 'Lima'}}`),
			textReply(`{'name': 'get_weather', 'arguments': {'town': 'Lima'}}`),
			toolReply(call("get_weather", `{"city":"Lima"}`)), textReply("Sunny."),
		}, "Sunny.", nil, 1, 1, ""},
		{"off: the text is the answer", agentloop.Config{ContentCalls: agentloop.ParseContentCalls("test-*=off")},
			[]llmtest.Reply{textReply(seedLike)}, seedLike, nil, 0, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, tc.replies...)
			ev := &events{}
			l := newLoop(t, s, tc.cfg)
			res, err := l.Run(t.Context(), agentloop.Input{Task: "Weather in Lima?", Tools: tools, Sink: ev, Mode: agentloop.ModeFull})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if res.Answer != tc.wantAnswer {
				t.Errorf("answer %q, want %q", res.Answer, tc.wantAnswer)
			}
			if ts.calls.Load() != tc.wantCalls {
				t.Errorf("%d tool calls, want %d", ts.calls.Load(), tc.wantCalls)
			}
			reasks := ev.of(agentloop.EventContentCallReask)
			if len(reasks) != tc.wantReasks {
				t.Fatalf("%d re-asks, want %d: %+v", len(reasks), tc.wantReasks, reasks)
			}
			reqs := s.Requests()
			if len(reqs) != len(tc.replies) {
				t.Fatalf("%d requests, want %d", len(reqs), len(tc.replies))
			}
			for _, r := range reqs {
				for _, m := range r.Messages {
					if m.Role == llm.RoleAssistant && (strings.Contains(m.Content, "</tool_call>") || strings.Contains(m.Content, "town")) {
						t.Errorf("request %d holds a rejected reply in history: %q", r.N, m.Content)
					}
				}
			}
			if tc.wantReasks > 0 {
				r := reqs[len(reqs)-len(tc.replies)+1+indexOfReask(tc.name)]
				note := r.Messages[len(r.Messages)-1]
				if note.Role != llm.RoleUser || !strings.Contains(note.Content, "tools API") || reasks[0].Data["reason"] == "" {
					t.Errorf("re-ask note %q, event %+v", note.Content, reasks[0].Data)
				}
				if tc.wantErr != nil && !strings.Contains(err.Error(), "could not be read") {
					t.Errorf("error %q does not say why", err)
				}
			}
			rec := ev.of(agentloop.EventContentCallRecovered)
			if tc.wantRecover != "" {
				calls, _ := rec[0].Data["calls"].([]map[string]any)
				if len(rec) != 1 || len(calls) != 1 || calls[0]["shape"] != tc.wantRecover || calls[0]["name"] != "get_weather" {
					t.Errorf("recovered events %+v", rec)
				}
				asst := reqs[1].Messages[len(reqs[1].Messages)-2]
				if asst.Content != "" || len(asst.ToolCalls) != 1 {
					t.Errorf("assistant message in history: %s", mustJSON(t, asst))
				}
			}
		})
	}
}

// indexOfReask is the request (0-based, after the first) that carried the
// re-ask note in each case of TestNearMissCallsInTheLoop.
func indexOfReask(name string) int {
	if strings.HasPrefix(name, "invalid after") {
		return 1 // first the schema retry, then the re-ask
	}
	return 0
}

// In "on" mode the content is read beside tool_calls; a call sent both
// ways runs once.
func TestContentCallsOnBesideToolCalls(t *testing.T) {
	t.Parallel()
	var ts testServer
	tools := newToolSet(t, &ts, false)
	s := llmtest.NewServer(t, llmtest.Reply{
		Content:   "[get_weather(city=\"Quito\"), get_weather(city=\"Lima\")]",
		ToolCalls: []llm.ToolCall{call("get_weather", `{"city": "Lima"}`)},
	}, textReply("Both sunny."))
	l := newLoop(t, s, agentloop.Config{ContentCalls: agentloop.ContentCalls{Default: agentloop.ContentCallsOn}})
	res, err := l.Run(t.Context(), agentloop.Input{Task: "Weather?", Tools: tools, Mode: agentloop.ModeFull})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range toolMessages(res.Messages) {
		got = append(got, m.Content)
	}
	if strings.Join(got, "|") != "weather in Lima: 21c, sunny|weather in Quito: 21c, sunny" {
		t.Errorf("results %v", got)
	}
}

// The tool-less last request: a reply that is only debris is asked again,
// and fails the job when it is debris again.
func TestFinalAnswerDebris(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		finals  []llmtest.Reply
		want    string
		wantErr error
	}{
		{"re-asked", []llmtest.Reply{textReply(`get_weather("Lima")`), textReply("Sunny.")}, "Sunny.", nil},
		{"debris twice", []llmtest.Reply{textReply(`get_weather("Lima")`), textReply("<tool_call>get_weather Lima")}, "", agentloop.ErrMalformedCall},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t, append([]llmtest.Reply{toolReply(call("echo", `{"text":"a"}`))}, tc.finals...)...)
			ev := &events{}
			l := newLoop(t, s, agentloop.Config{})
			res, err := l.Run(t.Context(), agentloop.Input{Task: "go", Tools: tools, MaxRounds: 1, Sink: ev})
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if res.Answer != tc.want {
				t.Errorf("answer %q", res.Answer)
			}
			if r := ev.of(agentloop.EventContentCallReask); len(r) != 1 || r[0].Data["final"] != true {
				t.Errorf("re-ask events %+v", r)
			}
		})
	}
}
