package agentloop_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// vllmContextRefusal is vLLM's refusal of a prompt over the window.
const vllmContextRefusal = "This model's maximum context length is 4096 tokens. However, you requested 5113 tokens (4089 in the messages, 1024 in the completion). Please reduce the length of the messages or completion."

// A job whose history outgrows the model's context window: the server
// refused the next request (vLLM, llama.cpp and OpenAI each in their
// words) and the job failed with it. The request is now sent again with
// the tool outputs the model already read cut, a level at a time, and so
// is every later request; the transcript keeps what the tools said.
func TestContextWindowCompaction(t *testing.T) {
	t.Parallel()
	big := `{"text":"0123456789","repeat":600}` // 6,000 bytes of output
	for _, tc := range []struct {
		name    string
		limit   int    // request bodies over it are refused
		refusal string // the server's words
		code    string // its error code
		// status and body, when body is set, are the refusal as the
		// server sends it (refusal and code are then unused).
		status int
		body   string
		// wantLevels are the compaction levels the job went through.
		wantLevels []int
		wantErr    bool
	}{
		// The third request (both outputs) is refused: the first one's is cut short.
		{"vLLM, an earlier output cut short", 12_000, vllmContextRefusal, "", 0, "", []int{1}, false},
		// Already the second (one output, the last round's) is refused:
		// levels 1 and 2 have nothing to cut, the last round's output is.
		{"llama.cpp, the last round cut", 7_000, "the request exceeds the available context size, try increasing it", "", 0, "", []int{3}, false},
		{"OpenAI's code", 4_500, "Your input is long.", "context_length_exceeded", 0, "", []int{3}, false},
		// Servers whose words name no context: TGI (its messages API, a
		// 422: huggingface/chat-ui#1149, meta-llama/llama#1103), Gemini
		// (google-gemini/gemini-cli#4118, an array as Google's APIs send),
		// llama.cpp's older server and LM Studio (lreuss07/secintel-ai#1).
		{"TGI, inputs + max_new_tokens", 12_000, "", "", 422, `{"error":"Input validation error: ` + "`inputs` tokens + `max_new_tokens`" + ` must be <= 4096. Given: 4000 ` + "`inputs` tokens and 1000 `max_new_tokens`" + `","error_type":"validation"}`, []int{1}, false},
		{"TGI, inputs", 12_000, "", "", 422, `{"error":"Input validation error: ` + "`inputs`" + ` must have less than 4096 tokens. Given: 4545","error_type":"validation"}`, []int{1}, false},
		{"Gemini", 12_000, "", "", 400, `[{"error":{"code":400,"message":"The input token count (132478) exceeds the maximum number of tokens allowed (131072).","status":"INVALID_ARGUMENT"}}]`, []int{1}, false},
		{"n_keep >= n_ctx", 12_000, "", "", 400, `{"error":"Cannot truncate prompt with n_keep (14169) >= n_ctx (4096)"}`, []int{1}, false},
		// The first request, with no tool output, is refused: nothing to cut.
		{"nothing to cut", 1_000, vllmContextRefusal, "", 0, "", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t)
			var script sync.Mutex
			answered := 0 // of the script, requests that got through
			s.Handle(func(req llmtest.RecordedRequest) llmtest.Reply {
				if len(req.Raw) > tc.limit {
					body := `{"object":"error","message":"` + tc.refusal + `","type":"BadRequestError","code":400}` // vLLM's shape
					if tc.code != "" {
						body = `{"error":{"message":"` + tc.refusal + `","type":"invalid_request_error","param":"messages","code":"` + tc.code + `"}}`
					}
					if tc.body != "" {
						return llmtest.Reply{Status: tc.status, Body: tc.body}
					}
					return llmtest.Reply{Status: 400, Body: body}
				}
				script.Lock()
				defer script.Unlock()
				answered++
				if answered <= 2 {
					return toolReply(call("echo", big))
				}
				return textReply("done")
			})
			var mu sync.Mutex
			var levels []int
			sink := agentloop.SinkFunc(func(_ context.Context, e agentloop.Event) {
				if e.Type == agentloop.EventContextCompacted {
					mu.Lock()
					levels = append(levels, e.Data["level"].(int))
					mu.Unlock()
				}
			})
			res, err := newLoop(t, s, agentloop.Config{MaxToolOutput: 16 << 10}).Run(t.Context(), agentloop.Input{JobID: "j", Task: "echo twice", Tools: tools, Mode: agentloop.ModeFull, Sink: sink})
			mu.Lock()
			defer mu.Unlock()
			if tc.wantErr {
				var apiErr *llm.APIError
				if !errors.As(err, &apiErr) || !strings.Contains(apiErr.Message, "maximum context length") {
					t.Fatalf("err = %v, want the server's refusal", err)
				}
			} else if err != nil || res.Answer != "done" {
				t.Fatalf("err = %v, answer %q", err, res.Answer)
			}
			if !slices.Equal(levels, tc.wantLevels) {
				t.Errorf("compaction levels %v, want %v", levels, tc.wantLevels)
			}
			if tc.wantErr {
				return
			}
			// Every request after the first refusal was cut, and fit.
			reqs := s.Requests()
			lastReq := reqs[len(reqs)-1]
			if len(lastReq.Raw) > tc.limit || !strings.Contains(string(lastReq.Raw), "left out to fit the model's context window") {
				t.Errorf("last request %d bytes, over %d or not cut", len(lastReq.Raw), tc.limit)
			}
			// The transcript keeps the outputs whole.
			n := 0
			for _, m := range res.Messages {
				if m.Role == llm.RoleTool {
					n++
					if len(m.Content) != 6000 {
						t.Errorf("transcript's tool output is %d bytes, want 6000", len(m.Content))
					}
				}
			}
			if n != 2 {
				t.Errorf("%d tool outputs in the transcript, want 2", n)
			}
		})
	}
}

// A request still refused for the model's window once every cut is made
// (or with no tool output to cut) fails the job, after as many requests
// as there were levels that cut something, with the server's refusal and
// what the loop did about it: the refusal alone ("Please reduce the
// length of the messages") read as if nothing had been tried.
func TestContextStillOverAfterTheCuts(t *testing.T) {
	t.Parallel()
	big := `{"text":"0123456789","repeat":600}`
	for _, tc := range []struct {
		name     string
		limit    int
		requests int
		note     string
	}{
		{"still over", 2_500, 3, "even with 1 tool output the model had read cut (3952 bytes left out)"},
		{"nothing to cut", 1_000, 1, "with no tool output the model had read left to cut"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var ts testServer
			tools := newToolSet(t, &ts, false)
			s := llmtest.NewServer(t)
			s.Handle(func(req llmtest.RecordedRequest) llmtest.Reply {
				if len(req.Raw) > tc.limit {
					return llmtest.Reply{Status: 400, Body: `{"object":"error","message":"` + vllmContextRefusal + `","type":"BadRequestError","code":400}`}
				}
				return toolReply(call("echo", big))
			})
			_, err := newLoop(t, s, agentloop.Config{MaxToolOutput: 16 << 10}).Run(t.Context(), agentloop.Input{JobID: "j", Task: "echo", Tools: tools, Mode: agentloop.ModeFull})
			var apiErr *llm.APIError
			if !errors.As(err, &apiErr) || !strings.Contains(err.Error(), vllmContextRefusal) || !strings.Contains(err.Error(), tc.note) {
				t.Fatalf("err = %v, want the server's refusal and %q", err, tc.note)
			}
			if n := len(s.Requests()); n != tc.requests {
				t.Errorf("%d requests, want %d", n, tc.requests)
			}
		})
	}
}
