package llmtest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// post sends body to the server's chat-completions endpoint.
func post(t *testing.T, s *llmtest.Server, body string) (int, http.Header, map[string]any) {
	t.Helper()
	resp, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("response is not JSON: %v: %s", err, raw)
	}
	return resp.StatusCode, resp.Header, out
}

func TestServerReplies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		reply      llmtest.Reply
		wantStatus int
		check      func(t *testing.T, h http.Header, out map[string]any)
	}{
		{
			name:       "text",
			reply:      llmtest.Reply{Content: "hi", Usage: &llm.Usage{PromptTokens: 7, CompletionTokens: 2}},
			wantStatus: 200,
			check: func(t *testing.T, _ http.Header, out map[string]any) {
				choice := out["choices"].([]any)[0].(map[string]any)
				if got := choice["message"].(map[string]any)["content"]; got != "hi" {
					t.Errorf("content = %v", got)
				}
				if choice["finish_reason"] != "stop" {
					t.Errorf("finish_reason = %v", choice["finish_reason"])
				}
				if out["object"] != "chat.completion" || out["model"] != "m1" {
					t.Errorf("object/model = %v/%v", out["object"], out["model"])
				}
				if u := out["usage"].(map[string]any); u["total_tokens"] != 9.0 {
					t.Errorf("usage = %v", u)
				}
			},
		},
		{
			name: "tool calls get ids",
			reply: llmtest.Reply{ToolCalls: []llm.ToolCall{
				{Function: llm.FunctionCall{Name: "a", Arguments: `{}`}},
				{ID: "mine", Function: llm.FunctionCall{Name: "b", Arguments: `{"x":1}`}},
			}},
			wantStatus: 200,
			check: func(t *testing.T, _ http.Header, out map[string]any) {
				choice := out["choices"].([]any)[0].(map[string]any)
				calls := choice["message"].(map[string]any)["tool_calls"].([]any)
				id0 := calls[0].(map[string]any)["id"]
				id1 := calls[1].(map[string]any)["id"]
				if id0 != "call_1_0" || id1 != "mine" {
					t.Errorf("ids = %v, %v", id0, id1)
				}
				if choice["finish_reason"] != "tool_calls" {
					t.Errorf("finish_reason = %v", choice["finish_reason"])
				}
			},
		},
		{
			name:       "error with header",
			reply:      llmtest.Reply{Status: 429, Content: "slow down", Header: map[string]string{"Retry-After": "2"}},
			wantStatus: 429,
			check: func(t *testing.T, h http.Header, out map[string]any) {
				if h.Get("Retry-After") != "2" {
					t.Errorf("Retry-After = %q", h.Get("Retry-After"))
				}
				if msg := out["error"].(map[string]any)["message"]; msg != "slow down" {
					t.Errorf("message = %v", msg)
				}
			},
		},
		{
			name:       "raw body",
			reply:      llmtest.Reply{Status: 502, Body: `{"error":{"message":"gateway"}}`},
			wantStatus: 502,
			check: func(t *testing.T, _ http.Header, out map[string]any) {
				if msg := out["error"].(map[string]any)["message"]; msg != "gateway" {
					t.Errorf("message = %v", msg)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, tt.reply)
			status, h, out := post(t, s, `{"model":"m1","messages":[{"role":"user","content":"x"}]}`)
			if status != tt.wantStatus {
				t.Fatalf("status = %d, want %d: %v", status, tt.wantStatus, out)
			}
			tt.check(t, h, out)
		})
	}
}

func TestServerRecordsRequests(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, llmtest.Reply{Content: "ok"})
	body := `{"model":"m","messages":[` +
		`{"role":"system","content":"sys"},` +
		`{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
		`{"role":"tool","content":"r","tool_call_id":"c1"}],` +
		`"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}],` +
		`"tool_choice":"auto"}`
	if status, _, out := post(t, s, body); status != 200 {
		t.Fatalf("status %d: %v", status, out)
	}
	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.N != 1 || r.Model != "m" || r.ToolChoice != "auto" || string(r.Raw) != body {
		t.Errorf("recorded %+v", r)
	}
	if len(r.Messages) != 4 || r.Messages[1].Content != "ab" || r.Messages[2].ToolCalls[0].Function.Name != "f" || r.Messages[3].ToolCallID != "c1" {
		t.Errorf("messages = %+v", r.Messages)
	}
	if len(r.Tools) != 1 || r.Tools[0].Name != "f" || string(r.Tools[0].Parameters) != `{"type":"object"}` {
		t.Errorf("tools = %+v", r.Tools)
	}
	if want := `[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}]`; string(r.ToolsJSON) != want {
		t.Errorf("ToolsJSON = %s", r.ToolsJSON)
	}
}

func TestServerUnscriptedAndHandler(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	status, _, out := post(t, s, `{"messages":[]}`)
	if status != 500 || !strings.Contains(out["error"].(map[string]any)["message"].(string), "request 1") {
		t.Fatalf("unscripted: %d %v", status, out)
	}
	s.Handle(func(r llmtest.RecordedRequest) llmtest.Reply { return llmtest.Reply{Content: "dyn"} })
	s.Push(llmtest.Reply{Content: "queued"})
	for _, want := range []string{"queued", "dyn", "dyn"} {
		_, _, out := post(t, s, `{"messages":[]}`)
		got := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"]
		if got != want {
			t.Errorf("content = %v, want %v", got, want)
		}
		if out["model"] != llmtest.DefaultModel {
			t.Errorf("model = %v", out["model"])
		}
	}
	if n := len(s.Requests()); n != 4 {
		t.Errorf("%d requests", n)
	}
}

func TestServerStreamRejected(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, llmtest.Reply{Content: "x"})
	if status, _, _ := post(t, s, `{"stream":true,"messages":[]}`); status != 400 {
		t.Errorf("status = %d", status)
	}
}

func TestServerWaitRequestsAndBlock(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	s := llmtest.NewServer(t, llmtest.Reply{Content: "late", Block: release})
	done := make(chan int, 1)
	go func() {
		resp, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(`{"messages":[]}`))
		if err != nil {
			done <- -1
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitRequests(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("reply was not held by Block")
	default:
	}
	close(release)
	if got := <-done; got != 200 {
		t.Errorf("status = %d", got)
	}

	short, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := s.WaitRequests(short, 2); err == nil {
		t.Error("WaitRequests with cancelled ctx returned nil")
	}
}
