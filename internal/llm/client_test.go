package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testMaxRetryDelay caps openai-go's backoff in tests, so retry tests barely
// wait; a Retry-After up to it is still honoured.
const testMaxRetryDelay = 50 * time.Millisecond

// newClient returns a client for s with tiny backoff, so retry tests do not wait.
func newClient(t *testing.T, s *llmtest.Server, mod func(*llm.Config)) *llm.Client {
	t.Helper()
	cfg := llm.Config{
		BaseURL: s.URL(), APIKey: "sk-test", Model: "test-model",
		MaxRetryDelay: testMaxRetryDelay,
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testCtx bounds a test's waiting so a regression fails instead of hanging.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func userRequest() llm.Request {
	return llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
}

func TestCompleteRoundTrip(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, llmtest.Reply{
		Content: "let me look",
		ToolCalls: []llm.ToolCall{
			{ID: "call_a", Function: llm.FunctionCall{Name: "search", Arguments: `{"q":"go"}`}},
			{Function: llm.FunctionCall{Name: "read", Arguments: `not json`}},
		},
		Usage: &llm.Usage{PromptTokens: 120, CompletionTokens: 30, CachedPromptTokens: 100},
	})
	c := newClient(t, s, func(cfg *llm.Config) { cfg.Headers = map[string]string{"X-Title": "jetagent"} })
	req := llm.Request{
		Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: "be brief"},
			{Role: llm.RoleUser, Content: "find go docs"},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
				{ID: "c1", Type: "function", Function: llm.FunctionCall{Name: "search", Arguments: `{"q":"golang"}`}},
				{ID: "c2", Type: "function", Function: llm.FunctionCall{Name: "read", Arguments: `{}`}},
			}},
			{Role: llm.RoleTool, ToolCallID: "c1", Content: "result 1"},
			{Role: llm.RoleTool, ToolCallID: "c2", Content: "result 2"},
			{Role: llm.RoleAssistant, Content: "thinking"},
			{Role: llm.RoleUser, Content: "go on"},
		},
		Tools:      []llm.Tool{{Name: "search", Description: "Search.", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}},
		ToolChoice: "required",
	}
	resp, err := c.Complete(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}

	want := llm.Response{
		Message: llm.Message{Role: llm.RoleAssistant, Content: "let me look", ToolCalls: []llm.ToolCall{
			{ID: "call_a", Type: "function", Function: llm.FunctionCall{Name: "search", Arguments: `{"q":"go"}`}},
			{ID: "call_1_1", Type: "function", Function: llm.FunctionCall{Name: "read", Arguments: `not json`}},
		}},
		FinishReason: "tool_calls",
		Usage:        llm.Usage{PromptTokens: 120, CompletionTokens: 30, CachedPromptTokens: 100},
		Model:        "test-model",
	}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("response\n got %+v\nwant %+v", resp, want)
	}

	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	got := reqs[0]
	if !reflect.DeepEqual(got.Messages, req.Messages) {
		t.Errorf("messages sent\n got %+v\nwant %+v", got.Messages, req.Messages)
	}
	if got.Model != "test-model" || got.ToolChoice != "required" {
		t.Errorf("model %q tool_choice %v", got.Model, got.ToolChoice)
	}
	if !reflect.DeepEqual(got.Tools, req.Tools) {
		t.Errorf("tools sent %+v", got.Tools)
	}
	if h := got.Header.Get("Authorization"); h != "Bearer sk-test" {
		t.Errorf("Authorization = %q", h)
	}
	if h := got.Header.Get("X-Title"); h != "jetagent" {
		t.Errorf("X-Title = %q", h)
	}
	// An assistant turn with tool calls and no text omits content.
	var raw struct {
		Messages []map[string]json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(got.Raw, &raw); err != nil {
		t.Fatal(err)
	}
	if c, ok := raw.Messages[2]["content"]; ok && string(c) != "null" {
		t.Errorf("assistant tool-call message content = %s", c)
	}
}

func TestCompleteRequestOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		req            llm.Request
		wantModel      string
		wantToolChoice any
	}{
		{"default model", userRequest(), "test-model", nil},
		{"model override", llm.Request{Model: "other", Messages: userRequest().Messages}, "other", nil},
		{"tool choice none", llm.Request{Messages: userRequest().Messages, ToolChoice: "none"}, "test-model", "none"},
		{"named tool choice", llm.Request{Messages: userRequest().Messages, ToolChoice: "search",
			Tools: []llm.Tool{{Name: "search"}}}, "test-model",
			map[string]any{"type": "function", "function": map[string]any{"name": "search"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, llmtest.Reply{Content: "ok"})
			resp, err := newClient(t, s, nil).Complete(testCtx(t), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			r := s.Requests()[0]
			if r.Model != tt.wantModel || resp.Model != tt.wantModel {
				t.Errorf("model sent %q, reported %q, want %q", r.Model, resp.Model, tt.wantModel)
			}
			if !reflect.DeepEqual(r.ToolChoice, tt.wantToolChoice) {
				t.Errorf("tool_choice = %#v, want %#v", r.ToolChoice, tt.wantToolChoice)
			}
		})
	}
}

func TestToolsJSONSentExactly(t *testing.T) {
	t.Parallel()
	tools := []llm.Tool{
		// Key order, big integers and HTML-ish text must survive untouched.
		{Name: "zeta", Description: "Use <b> & co.", Parameters: json.RawMessage(`{
			"type": "object",
			"required": ["z", "a"],
			"properties": {"z": {"type": "integer", "maximum": 12345678901234567890}, "a": {"type": "string"}},
			"additionalProperties": false
		}`)},
		{Name: "nil_params"},
		{Name: "null_params", Parameters: json.RawMessage(`null`)},
	}
	const want = `[` +
		`{"type":"function","function":{"name":"zeta","description":"Use <b> & co.","parameters":{"type":"object","required":["z","a"],"properties":{"z":{"type":"integer","maximum":12345678901234567890},"a":{"type":"string"}},"additionalProperties":false}}},` +
		`{"type":"function","function":{"name":"nil_params","parameters":{"type":"object"}}},` +
		`{"type":"function","function":{"name":"null_params","parameters":{"type":"object"}}}` +
		`]`
	s := llmtest.NewServer(t, llmtest.Reply{Content: "1"}, llmtest.Reply{Content: "2"})
	c := newClient(t, s, nil)
	req := userRequest()
	req.Tools = tools
	for range 2 {
		if _, err := c.Complete(testCtx(t), req); err != nil {
			t.Fatal(err)
		}
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: "x"}, llm.Message{Role: llm.RoleUser, Content: "y"})
	}
	// ToolJSON is what token counting uses: it must be what is sent.
	var parts []string
	for _, tool := range tools {
		b, err := llm.ToolJSON(tool)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, string(b))
	}
	if joined := "[" + strings.Join(parts, ",") + "]"; joined != want {
		t.Errorf("ToolJSON\n got %s\nwant %s", joined, want)
	}
	for _, r := range s.Requests() {
		if string(r.ToolsJSON) != want {
			t.Errorf("request %d tools\n got %s\nwant %s", r.N, r.ToolsJSON, want)
		}
	}
}

func TestCompleteRetries(t *testing.T) {
	t.Parallel()
	ok := llmtest.Reply{Content: "done"}
	tests := []struct {
		name         string
		replies      []llmtest.Reply
		maxRetries   int
		wantRequests int
		wantDelays   []time.Duration // nil: not checked
		wantErr      func(t *testing.T, err error)
	}{
		{
			name:         "429 retry-after-ms honoured",
			replies:      []llmtest.Reply{{Status: 429, Header: map[string]string{"retry-after-ms": "20"}}, ok},
			wantRequests: 2,
			wantDelays:   []time.Duration{20 * time.Millisecond},
		},
		{
			// Backoff alone would wait up to testMaxRetryDelay; Retry-After 0 replaces it.
			name:         "429 Retry-After seconds honoured",
			replies:      []llmtest.Reply{{Status: 429, Header: map[string]string{"Retry-After": "0"}}, ok},
			wantRequests: 2,
			wantDelays:   []time.Duration{0},
		},
		{
			name:         "5xx then success",
			replies:      []llmtest.Reply{{Status: 500}, {Status: 502, Body: "Bad Gateway"}, {Status: 503}, ok},
			wantRequests: 4,
			// The SDK's backoff (0.5 s doubling) capped at MaxRetryDelay.
			wantDelays: []time.Duration{testMaxRetryDelay, testMaxRetryDelay, testMaxRetryDelay},
		},
		{
			name:         "409 retried",
			replies:      []llmtest.Reply{{Status: 409}, ok},
			wantRequests: 2,
		},
		{
			name:         "x-should-retry true wins over 400",
			replies:      []llmtest.Reply{{Status: 400, Header: map[string]string{"x-should-retry": "true"}}, ok},
			wantRequests: 2,
		},
		{
			name:         "Retry-After beyond MaxRetryDelay gives up at once",
			replies:      []llmtest.Reply{{Status: 429, Content: "come back in a minute", Header: map[string]string{"Retry-After": "60"}}, ok},
			wantRequests: 1,
			wantErr: func(t *testing.T, err error) {
				var apiErr *llm.APIError
				if !errors.As(err, &apiErr) || apiErr.Status != 429 || !apiErr.Retryable || apiErr.RetryAfter != time.Minute {
					t.Errorf("err = %v (%#v)", err, apiErr)
				}
				if errors.Is(err, llm.ErrNonRetryable) || !strings.Contains(err.Error(), "giving up after 1 attempt (not retried)") ||
					!strings.Contains(err.Error(), "come back in a minute") || !strings.Contains(err.Error(), "beyond MaxRetryDelay") {
					t.Errorf("err = %v", err)
				}
			},
		},
		{
			name:         "408 retried",
			replies:      []llmtest.Reply{{Status: 408}, ok},
			wantRequests: 2,
		},
		{
			name:         "retries exhausted",
			replies:      []llmtest.Reply{{Status: 429, Content: "rate limited"}, {Status: 429, Content: "rate limited"}, {Status: 429, Content: "still rate limited"}},
			maxRetries:   2,
			wantRequests: 3,
			wantErr: func(t *testing.T, err error) {
				var apiErr *llm.APIError
				if !errors.As(err, &apiErr) || apiErr.Status != 429 || !apiErr.Retryable || apiErr.Message != "still rate limited" {
					t.Errorf("err = %v (%#v)", err, apiErr)
				}
				if errors.Is(err, llm.ErrNonRetryable) || !strings.Contains(err.Error(), "after 3 attempts") {
					t.Errorf("err = %v", err)
				}
			},
		},
		{
			name:         "400 not retried, provider message kept",
			replies:      []llmtest.Reply{{Status: 400, Content: "Invalid schema for function 'x': null is not of type object"}, ok},
			wantRequests: 1,
			wantErr: func(t *testing.T, err error) {
				var apiErr *llm.APIError
				if !errors.As(err, &apiErr) || apiErr.Status != 400 || apiErr.Retryable ||
					apiErr.Message != "Invalid schema for function 'x': null is not of type object" || apiErr.Type != "invalid_request_error" {
					t.Errorf("err = %v (%#v)", err, apiErr)
				}
				if !errors.Is(err, llm.ErrNonRetryable) || !strings.Contains(err.Error(), "null is not of type object") {
					t.Errorf("err = %v", err)
				}
			},
		},
		{
			name:         "401 with non-OpenAI body keeps the body",
			replies:      []llmtest.Reply{{Status: 401, Body: `{"detail":"bad token"}`}},
			wantRequests: 1,
			wantErr: func(t *testing.T, err error) {
				var apiErr *llm.APIError
				if !errors.As(err, &apiErr) || apiErr.Status != 401 || apiErr.Message != `{"detail":"bad token"}` || !errors.Is(err, llm.ErrNonRetryable) {
					t.Errorf("err = %v (%#v)", err, apiErr)
				}
			},
		},
		{
			name:         "error given as a string",
			replies:      []llmtest.Reply{{Status: 404, Body: `{"error":"model 'x' not found"}`}},
			wantRequests: 1,
			wantErr: func(t *testing.T, err error) {
				var apiErr *llm.APIError
				if !errors.As(err, &apiErr) || apiErr.Message != "model 'x' not found" || !errors.Is(err, llm.ErrNonRetryable) {
					t.Errorf("err = %v (%#v)", err, apiErr)
				}
			},
		},
		{
			name:         "x-should-retry false wins over 500",
			replies:      []llmtest.Reply{{Status: 500, Content: "fatal", Header: map[string]string{"x-should-retry": "false"}}, ok},
			wantRequests: 1,
			wantErr: func(t *testing.T, err error) {
				if !errors.Is(err, llm.ErrNonRetryable) {
					t.Errorf("err = %v", err)
				}
			},
		},
		{
			name:         "no choices",
			replies:      []llmtest.Reply{{Body: `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[]}`}},
			wantRequests: 1,
			wantErr: func(t *testing.T, err error) {
				if !errors.Is(err, llm.ErrNoChoices) || !errors.Is(err, llm.ErrNonRetryable) {
					t.Errorf("err = %v", err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, tt.replies...)
			var (
				mu     sync.Mutex
				delays []time.Duration
			)
			c := newClient(t, s, func(cfg *llm.Config) {
				cfg.MaxRetries = tt.maxRetries
				cfg.OnRetry = func(_ int, d time.Duration, _ error) {
					mu.Lock()
					delays = append(delays, d)
					mu.Unlock()
				}
			})
			resp, err := c.Complete(testCtx(t), userRequest())
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if resp.Message.Content != "done" {
					t.Errorf("content = %q", resp.Message.Content)
				}
			} else {
				if err == nil {
					t.Fatal("no error")
				}
				tt.wantErr(t, err)
			}
			if n := len(s.Requests()); n != tt.wantRequests {
				t.Errorf("%d requests, want %d", n, tt.wantRequests)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(delays) != tt.wantRequests-1 {
				t.Errorf("OnRetry called %d times, want %d", len(delays), tt.wantRequests-1)
			}
			if tt.wantDelays != nil && !reflect.DeepEqual(delays, tt.wantDelays) {
				t.Errorf("delays = %v, want %v", delays, tt.wantDelays)
			}
		})
	}
}

func TestCompleteTimeoutRetried(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		hung         int // replies that never come, before one that does
		maxRetries   int
		wantRequests int
		wantErr      bool
	}{
		{name: "retried then answered", hung: 1, wantRequests: 2},
		{name: "retries exhausted", hung: 2, maxRetries: 1, wantRequests: 2, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hang := make(chan struct{})
			t.Cleanup(func() { close(hang) })
			var replies []llmtest.Reply
			for range tt.hung {
				replies = append(replies, llmtest.Reply{Block: hang})
			}
			s := llmtest.NewServer(t, append(replies, llmtest.Reply{Content: "done"})...)
			var retryErrs []error
			c := newClient(t, s, func(cfg *llm.Config) {
				// The answered attempt must come back within it: 2 s,
				// not 200 ms as it was, which an HTTP round trip under
				// -race on a loaded machine can take. The hung ones
				// wait it out whatever it is.
				cfg.Timeout = 2 * time.Second
				cfg.MaxRetries = tt.maxRetries
				cfg.OnRetry = func(_ int, _ time.Duration, err error) { retryErrs = append(retryErrs, err) }
			})
			resp, err := c.Complete(testCtx(t), userRequest())
			isTimeout := func(err error) bool {
				return errors.Is(err, llm.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded)
			}
			if tt.wantErr {
				if !isTimeout(err) || errors.Is(err, llm.ErrNonRetryable) || !strings.Contains(err.Error(), "after 2 attempts") {
					t.Errorf("err = %v", err)
				}
			} else if err != nil || resp.Message.Content != "done" {
				t.Errorf("content %q, err %v", resp.Message.Content, err)
			}
			if n := len(s.Requests()); n != tt.wantRequests {
				t.Errorf("%d requests, want %d", n, tt.wantRequests)
			}
			if len(retryErrs) != tt.wantRequests-1 {
				t.Errorf("OnRetry errors %v, want %d", retryErrs, tt.wantRequests-1)
			}
			for _, err := range retryErrs {
				if !isTimeout(err) {
					t.Errorf("retry error = %v", err)
				}
			}
		})
	}
}

func TestCompleteConnectionErrorRetried(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	s.Close() // nothing listens on its address any more
	attempts := 0
	c := newClient(t, s, func(cfg *llm.Config) {
		cfg.MaxRetries = 2
		cfg.OnRetry = func(int, time.Duration, error) { attempts++ }
	})
	_, err := c.Complete(testCtx(t), userRequest())
	if err == nil || errors.Is(err, llm.ErrNonRetryable) || !strings.Contains(err.Error(), "after 3 attempts") {
		t.Errorf("err = %v", err)
	}
	if attempts != 2 {
		t.Errorf("retried %d times, want 2", attempts)
	}
}

func TestCompleteCancellation(t *testing.T) {
	t.Parallel()
	t.Run("in flight", func(t *testing.T) {
		t.Parallel()
		hang := make(chan struct{})
		t.Cleanup(func() { close(hang) })
		s := llmtest.NewServer(t, llmtest.Reply{Block: hang})
		c := newClient(t, s, nil)
		ctx, cancel := context.WithCancel(testCtx(t))
		errc := make(chan error, 1)
		go func() {
			_, err := c.Complete(ctx, userRequest())
			errc <- err
		}()
		if err := s.WaitRequests(testCtx(t), 1); err != nil {
			t.Fatal(err)
		}
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want context.Canceled", err)
			}
		case <-testCtx(t).Done():
			t.Fatal("Complete did not return after cancel")
		}
		if n := len(s.Requests()); n != 1 {
			t.Errorf("%d requests after cancel, want 1", n)
		}
	})
	t.Run("during Retry-After wait", func(t *testing.T) {
		t.Parallel()
		// The provider asks for a minute; cancelling must end the wait at once
		// (if it did not, the test would run into its deadline).
		s := llmtest.NewServer(t, llmtest.Reply{Status: 429, Header: map[string]string{"Retry-After": "60"}})
		ctx, cancel := context.WithCancel(testCtx(t))
		defer cancel()
		var delay time.Duration
		c := newClient(t, s, func(cfg *llm.Config) {
			cfg.MaxRetryDelay = 2 * time.Minute
			cfg.OnRetry = func(_ int, d time.Duration, _ error) { delay = d; cancel() }
		})
		_, err := c.Complete(ctx, userRequest())
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "429") {
			t.Errorf("err = %v", err)
		}
		if delay != time.Minute {
			t.Errorf("Retry-After delay = %v, want 1m", delay)
		}
		if n := len(s.Requests()); n != 1 {
			t.Errorf("%d requests, want 1", n)
		}
	})
	t.Run("already cancelled", func(t *testing.T) {
		t.Parallel()
		s := llmtest.NewServer(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := newClient(t, s, nil).Complete(ctx, userRequest()); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v", err)
		}
	})
}

func TestBaseURLForms(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	s.Handle(func(llmtest.RecordedRequest) llmtest.Reply { return llmtest.Reply{Content: "ok"} })
	tests := []struct {
		name    string
		baseURL string
		wantErr bool
	}{
		{"without slash", s.URL(), false},
		{"with slash", s.URL() + "/", false},
		{"with spaces", "  " + s.URL() + "/ ", false},
		{"empty", "", true},
		{"no scheme", strings.TrimPrefix(s.URL(), "http://"), true},
		{"other scheme", "ftp://example.com/v1", true},
		{"query", s.URL() + "?x=1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := llm.New(llm.Config{BaseURL: tt.baseURL, Model: "m"})
			if tt.wantErr {
				if !errors.Is(err, llm.ErrConfig) {
					t.Errorf("err = %v, want ErrConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Complete(testCtx(t), userRequest()); err != nil {
				t.Errorf("Complete: %v", err)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		cfg       llm.Config
		wantField string // named in the error
	}{
		{"no base URL", llm.Config{Model: "m"}, "BaseURL"},
		{"no model", llm.Config{BaseURL: "http://localhost/v1"}, "Model"},
		{"negative MaxRetryDelay", llm.Config{BaseURL: "http://localhost/v1", Model: "m", MaxRetryDelay: -time.Second}, "MaxRetryDelay"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := llm.New(tt.cfg)
			if !errors.Is(err, llm.ErrConfig) || !strings.Contains(err.Error(), tt.wantField) {
				t.Errorf("err = %v, want ErrConfig naming %s", err, tt.wantField)
			}
		})
	}
	// Negative MaxRetries and Timeout mean none, not an error.
	if _, err := llm.New(llm.Config{BaseURL: "http://localhost/v1", Model: "m", MaxRetries: -1, Timeout: -1}); err != nil {
		t.Errorf("New with no retries and no timeout: %v", err)
	}
	c, err := llm.New(llm.Config{BaseURL: "http://localhost/v1", Model: "m"})
	if err != nil || c.Model() != "m" || c.BaseURL() != "http://localhost/v1/" {
		t.Errorf("New = %v, %v", c, err)
	}
}

func TestCompleteRejectsBadRequests(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  llm.Request
	}{
		{"unknown role", llm.Request{Messages: []llm.Message{{Role: "robot", Content: "x"}}}},
		{"tool message without id", llm.Request{Messages: []llm.Message{{Role: llm.RoleTool, Content: "x"}}}},
		{"invalid parameters", llm.Request{Messages: userRequest().Messages, Tools: []llm.Tool{{Name: "t", Parameters: json.RawMessage(`{"type":`)}}}},
		{"array parameters", llm.Request{Messages: userRequest().Messages, Tools: []llm.Tool{{Name: "t", Parameters: json.RawMessage(`[1]`)}}}},
		{"unnamed tool", llm.Request{Messages: userRequest().Messages, Tools: []llm.Tool{{Description: "x"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t)
			_, err := newClient(t, s, nil).Complete(testCtx(t), tt.req)
			if !errors.Is(err, llm.ErrNonRetryable) {
				t.Errorf("err = %v, want ErrNonRetryable", err)
			}
			if n := len(s.Requests()); n != 0 {
				t.Errorf("%d requests sent", n)
			}
		})
	}
}

func TestCompleteRefusal(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t, llmtest.Reply{Body: `{"id":"x","object":"chat.completion","created":1,"model":"m",` +
		`"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":null,"refusal":"I can't help with that."}}],` +
		`"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`})
	resp, err := newClient(t, s, nil).Complete(testCtx(t), userRequest())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Refusal != "I can't help with that." || resp.Message.Content != "" || resp.Usage.CompletionTokens != 4 {
		t.Errorf("resp = %+v", resp)
	}
}

// Not parallel: t.Setenv. The environment must not leak into requests.
func TestEnvironmentIgnored(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_ORG_ID", "org-from-env")
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	s := llmtest.NewServer(t, llmtest.Reply{Content: "ok"})
	c, err := llm.New(llm.Config{BaseURL: s.URL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Complete(testCtx(t), userRequest()); err != nil {
		t.Fatal(err)
	}
	h := s.Requests()[0].Header
	if h.Get("Authorization") != "" || h.Get("OpenAI-Organization") != "" {
		t.Errorf("environment leaked into headers: %v", h)
	}
}

// TestVersionlessBaseURLHinted: a 404 or 405 from a base URL that names no
// API version says that the API is usually under /v1 (a base URL of
// "http://localhost:11434" for a server that serves /v1/chat/completions);
// one that names a version, or another status, gets no such hint.
func TestVersionlessBaseURLHinted(t *testing.T) {
	t.Parallel()
	s := llmtest.NewServer(t)
	s.Handle(func(llmtest.RecordedRequest) llmtest.Reply {
		return llmtest.Reply{Status: http.StatusNotFound, Content: "no such model"}
	})
	root := strings.TrimSuffix(s.URL(), "/v1")
	tests := []struct {
		name, baseURL string
		hint          bool
	}{
		{"no version", root, true},
		{"no version, a path", root + "/api", true},
		{"/v1 (a model the server lacks)", s.URL(), false},
		{"/v1beta/openai", root + "/v1beta/openai", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, s, func(c *llm.Config) { c.BaseURL = tt.baseURL })
			_, err := c.Complete(testCtx(t), userRequest())
			var ae *llm.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want an APIError", err)
			}
			if got := strings.Contains(err.Error(), "names no API version: OpenAI-compatible servers serve the API under /v1, e.g. "+
				strings.TrimSuffix(tt.baseURL, "/")+"/v1"); got != tt.hint {
				t.Errorf("hint %v, want %v: %v", got, tt.hint, err)
			}
		})
	}
}
