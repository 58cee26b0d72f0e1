package llm_test

import (
	"errors"
	"testing"

	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
)

// Google's APIs, Gemini's OpenAI-compatible endpoint among them, send an
// error as a one-element array ([{"error": {...}}]). Its message is the
// error's. Before: the whole array's JSON was the message.
func TestGoogleErrorBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		status     int
		wantMsg    string
	}{
		{name: "missing thought signature", status: 400,
			body:    `[{"error":{"code":400,"message":"Function call is missing a thought_signature in functionCall parts.","status":"INVALID_ARGUMENT"}}]`,
			wantMsg: "Function call is missing a thought_signature in functionCall parts."},
		{name: "white space around", status: 404,
			body:    " [\n {\"error\": {\"code\": 404, \"message\": \"models/gemini-9 is not found\", \"status\": \"NOT_FOUND\"}}\n]\n",
			wantMsg: "models/gemini-9 is not found"},
		{name: "an array of something else stays whole", status: 400,
			body: `["bad", "request"]`, wantMsg: `["bad", "request"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, llmtest.Reply{Status: tc.status, Body: tc.body})
			_, err := newClient(t, s, nil).Complete(testCtx(t), userRequest())
			var apiErr *llm.APIError
			if !errors.As(err, &apiErr) || apiErr.Status != tc.status || apiErr.Message != tc.wantMsg || !errors.Is(err, llm.ErrNonRetryable) {
				t.Errorf("err = %v (%#v), want message %q", err, apiErr, tc.wantMsg)
			}
		})
	}
}
