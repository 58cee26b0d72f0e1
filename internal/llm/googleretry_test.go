package llm_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// gemini429 is Gemini's 429 (its OpenAI-compatible endpoint's shape): the
// wait is the retryDelay of a RetryInfo detail in the body, no header.
func gemini429(delay string) llmtest.Reply {
	return llmtest.Reply{Status: 429, Body: `[{"error":{"code":429,"message":"You exceeded your current quota. Please retry in ` + delay + `.",` +
		`"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[]},` +
		`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"` + delay + `"}]}}]`}
}

// A wait a Google error body asks for (google.rpc.RetryInfo) is honoured
// like a Retry-After: openai-go waits that long, and a wait beyond
// MaxRetryDelay ends the retries with it. Before: it was ignored, the
// SDK's backoff spent every retry within seconds, and a job told to wait
// half a minute was dead-lettered sooner.
func TestRetryDelayInTheBody(t *testing.T) {
	t.Parallel()
	ok := llmtest.Reply{Content: "done"}
	for _, tc := range []struct {
		name         string
		replies      []llmtest.Reply
		wantRequests int
		wantDelays   []time.Duration
		wantErr      string
	}{
		{name: "honoured", replies: []llmtest.Reply{gemini429("0.02s"), gemini429("0.03s"), ok},
			wantRequests: 3, wantDelays: []time.Duration{20 * time.Millisecond, 30 * time.Millisecond}},
		{name: "a header wins", replies: []llmtest.Reply{func() llmtest.Reply {
			r := gemini429("30s")
			r.Header = map[string]string{"Retry-After": "0"}
			return r
		}(), ok}, wantRequests: 2, wantDelays: []time.Duration{0}},
		{name: "beyond MaxRetryDelay", replies: []llmtest.Reply{gemini429("53s"), ok},
			wantRequests: 1, wantErr: "the provider asked to wait 53s, beyond MaxRetryDelay 1s"},
		{name: "without RetryInfo, the backoff", replies: []llmtest.Reply{{Status: 429, Body: `[{"error":{"code":429,"message":"Resource exhausted.","status":"RESOURCE_EXHAUSTED"}}]`}, ok},
			wantRequests: 2, wantDelays: []time.Duration{500 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, tc.replies...)
			var mu sync.Mutex
			var delays []time.Duration
			c := newClient(t, s, func(cfg *llm.Config) {
				cfg.MaxRetryDelay = time.Second
				cfg.OnRetry = func(_ int, d time.Duration, _ error) {
					mu.Lock()
					delays = append(delays, d)
					mu.Unlock()
				}
			})
			_, err := c.Complete(testCtx(t), userRequest())
			if n := len(s.Requests()); n != tc.wantRequests {
				t.Errorf("%d requests, want %d", n, tc.wantRequests)
			}
			if tc.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tc.wantErr != "" {
				var apiErr *llm.APIError
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, &apiErr) || !apiErr.Retryable || !strings.HasPrefix(apiErr.Message, "You exceeded your current quota") {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(delays) != len(tc.wantDelays) {
				t.Fatalf("retries announced with %v, want %v", delays, tc.wantDelays)
			}
			for i, d := range delays {
				if d != tc.wantDelays[i] {
					t.Errorf("retry %d announced after %s, want %s", i+1, d, tc.wantDelays[i])
				}
			}
		})
	}
}
