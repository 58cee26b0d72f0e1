package llm_test

import (
	"errors"
	"strings"
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

// Older vLLM and Mistral's API send an error as {"object": "error",
// "message", "type", "code"}: its message is the provider's. Before: the
// whole body's JSON was.
func TestFlatErrorBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body      string
		status          int
		wantMsg, wantTy string
	}{
		{name: "vLLM context length", status: 400,
			body:    `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}`,
			wantMsg: "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.", wantTy: "BadRequestError"},
		{name: "Mistral message order", status: 400,
			body:    `{"object":"error","message":"Unexpected role 'user' after role 'tool'","type":"invalid_request_message_order","param":null,"code":"3230"}`,
			wantMsg: "Unexpected role 'user' after role 'tool'", wantTy: "invalid_request_message_order"},
		{name: "no message stays whole", status: 401, body: `{"object":"error","type":"unauthorized"}`,
			wantMsg: `{"object":"error","type":"unauthorized"}`},
		// A proxy's or CDN's error page. Before: its first 4 KiB of HTML
		// were the message, in the job's error, state and events.
		{name: "an HTML error page", status: 403,
			body:    "<!DOCTYPE html>\n<html lang=\"en-US\"><head><title>Attention Required! | Cloudflare</title>" + strings.Repeat("<style>.x{color:red}</style>", 300) + "</head><body></body></html>",
			wantMsg: `an HTML page titled "Attention Required! | Cloudflare" (8515 bytes)`},
		{name: "an HTML page without a title", status: 404,
			body:    "<html>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>",
			wantMsg: `an HTML page (101 bytes): "<html>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := llmtest.NewServer(t, llmtest.Reply{Status: tc.status, Body: tc.body})
			_, err := newClient(t, s, nil).Complete(testCtx(t), userRequest())
			var apiErr *llm.APIError
			if !errors.As(err, &apiErr) || apiErr.Status != tc.status || apiErr.Message != tc.wantMsg || apiErr.Type != tc.wantTy {
				t.Errorf("err = %v (%#v), want message %q, type %q", err, apiErr, tc.wantMsg, tc.wantTy)
			}
		})
	}
}
