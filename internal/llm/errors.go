package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jetagent/jetagent/internal/redact"
)

var (
	// ErrNonRetryable marks errors that another attempt would not fix: an
	// API error such as 400/401/404, or a request that cannot be encoded.
	ErrNonRetryable = errors.New("llm: non-retryable error")
	// ErrNoChoices is returned when a 200 reply carries no choices.
	ErrNoChoices = errors.New("llm: response has no choices")
	// ErrTimeout marks an attempt that ran out of Config.Timeout. It is
	// deliberately not context.DeadlineExceeded, which means the caller's
	// own deadline.
	ErrTimeout = errors.New("llm: request timed out")
	// ErrConnection marks an attempt whose connection failed without a
	// response (refused, reset, closed before the reply: EOF), after the
	// client's own retries. Another attempt may well succeed.
	ErrConnection = errors.New("llm: connection")
)

// APIError is an HTTP error reply from the provider.
type APIError struct {
	Status int
	// Message is the provider's own message ("error.message", or the body
	// when it is not OpenAI-shaped).
	Message string
	// Type and Code are the provider's "error.type" and "error.code", if any.
	Type, Code string
	// Retryable reports whether the status (or x-should-retry) allows a retry.
	Retryable bool
	// RetryAfter is the wait the provider asked for (see HasRetryAfter).
	RetryAfter time.Duration
	// HasRetryAfter tells "retry after 0" from no header at all.
	HasRetryAfter bool
	// InReply marks an error object sent in the body of a 2xx reply (as
	// proxies relay an upstream failure). Status is then the HTTP status
	// its code names, or the reply's own when it names none (and the error
	// is not retried).
	InReply bool
	// Hint, when set, is the likeliest cause on the client's side, added to
	// the message (a base URL without the API's version path).
	Hint string
	// FailedGeneration is the model's output that its server refused as
	// a tool call it could not read: Groq's 400 with code
	// "tool_use_failed" quotes it as error.failed_generation ("" for
	// none).
	FailedGeneration string
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.InReply {
		if e.Status >= 400 {
			return fmt.Sprintf("llm: provider returned an error in a successful reply, with code %d: %s", e.Status, msg)
		}
		return fmt.Sprintf("llm: provider returned an error in a successful reply: %s", msg)
	}
	if e.Hint != "" {
		return fmt.Sprintf("llm: provider returned %d: %s (%s)", e.Status, msg, e.Hint)
	}
	return fmt.Sprintf("llm: provider returned %d: %s", e.Status, msg)
}

// versionlessHint is the Hint of a 404 or 405 from a base URL whose path
// names no API version: "http://localhost:11434" where the server serves
// ".../v1/chat/completions" (Ollama, vLLM, llama.cpp and OpenAI itself all
// do). A path with a version ("/v1", "/v1beta/openai") or naming openai
// (Azure's deployments) gets none.
func versionlessHint(status int, baseURL string) string {
	if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
		return ""
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		return ""
	}
	p := strings.ToLower(u.Path)
	if strings.Contains(p, "/v1") || strings.Contains(p, "/v2") || strings.Contains(p, "openai") {
		return ""
	}
	shown := strings.TrimSuffix(redact.URL(baseURL), "/") // the job's error is stored and published
	return fmt.Sprintf("the base URL %s names no API version: OpenAI-compatible servers serve the API under /v1, e.g. %s",
		shown, shown+"/v1")
}

// Is makes errors.Is(err, ErrNonRetryable) true for non-retryable API errors.
func (e *APIError) Is(target error) bool { return target == ErrNonRetryable && !e.Retryable }

// The policy below is openai-go v3's own (requestconfig.shouldRetry and
// parseRetryAfterHeader), which does the retrying: it is repeated here only
// to describe an error to the caller (APIError.Retryable, RetryAfter) and to
// announce a retry (Config.OnRetry) before the SDK waits.

// newAPIError builds an APIError from an error reply and its body.
func newAPIError(res *http.Response, body []byte) *APIError {
	e := &APIError{Status: res.StatusCode, Retryable: retryableStatus(res.StatusCode)}
	e.RetryAfter, e.HasRetryAfter = retryAfter(res.Header, time.Now())
	switch res.Header.Get("X-Should-Retry") { // compared as openai-go does
	case "true":
		e.Retryable = true
	case "false":
		e.Retryable = false
	}
	e.Message, e.Type, e.Code = providerMessage(body)
	if e.Code == "tool_use_failed" {
		var fg struct {
			Error struct {
				FailedGeneration string `json:"failed_generation"`
			} `json:"error"`
		}
		if json.Unmarshal(body, &fg) == nil {
			e.FailedGeneration = fg.Error.FailedGeneration
		}
	}
	return e
}

// providerMessage reads an OpenAI-shaped error body ({"error": {"message",
// "type", "code"}} or {"error": "text"}, also in a one-element array), or
// {"object": "error", "message", ...}; any other body (e.g. {"detail":
// ...}, plain text) is kept as the message itself, up to 4 KiB.
func providerMessage(body []byte) (msg, typ, code string) {
	// Older vLLM's and Mistral's API's shape.
	var flat struct {
		Error   json.RawMessage `json:"error"`
		Object  string          `json:"object"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(body, &flat) == nil && len(flat.Error) == 0 && flat.Object == "error" && flat.Message != "" {
		return flat.Message, flat.Type, jsonScalar(flat.Code)
	}
	var shaped struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(firstOfArray(body), &shaped) == nil && len(shaped.Error) > 0 {
		var obj struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		}
		var text string
		switch {
		case json.Unmarshal(shaped.Error, &obj) == nil && obj.Message != "":
			return obj.Message, obj.Type, jsonScalar(obj.Code)
		case json.Unmarshal(shaped.Error, &text) == nil && text != "":
			return text, "", ""
		}
	}
	if html := htmlPage(body); html != "" {
		return html, "", ""
	}
	if len(body) > 4<<10 {
		body = body[:4<<10]
	}
	return strings.ToValidUTF8(strings.TrimSpace(string(body)), ""), "", ""
}

// htmlTitle finds an HTML page's title.
var htmlTitle = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`)

// htmlPage describes body when it is an HTML page (a proxy's, a CDN's or
// a web server's error page) by its title, or else its start: its markup
// told nothing and was up to 4 KiB of the job's error. "" for any other
// body.
func htmlPage(body []byte) string {
	t := bytes.TrimSpace(body)
	head := bytes.ToLower(t[:min(len(t), 512)])
	if !bytes.HasPrefix(t, []byte("<")) || !bytes.Contains(head, []byte("<html")) && !bytes.Contains(head, []byte("<!doctype html")) {
		return ""
	}
	if m := htmlTitle.FindSubmatch(t); m != nil {
		if title := strings.Join(strings.Fields(strings.ToValidUTF8(string(m[1]), "")), " "); title != "" {
			if len(title) > snippetMax {
				title = strings.ToValidUTF8(title[:snippetMax], "") + "..."
			}
			return fmt.Sprintf("an HTML page titled %q (%d bytes)", title, len(t))
		}
	}
	return fmt.Sprintf("an HTML page (%d bytes): %s", len(t), snippet(t))
}

// firstOfArray is the first element of a JSON array (Google's APIs, Gemini's
// OpenAI-compatible endpoint among them, send [{"error": {...}}]), else body.
func firstOfArray(body []byte) []byte {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '[' {
		return body
	}
	var elems []json.RawMessage
	if json.Unmarshal(trimmed, &elems) != nil || len(elems) == 0 {
		return body
	}
	return elems[0]
}

// googleRetryDelay is the wait a Google error body asks for: the
// retryDelay of its google.rpc.RetryInfo detail (a protobuf duration,
// "17s"), which Gemini sends with a 429 instead of a Retry-After header.
func googleRetryDelay(body []byte) (time.Duration, bool) {
	if !bytes.Contains(body, []byte("RetryInfo")) {
		return 0, false
	}
	var e struct {
		Error struct {
			Details []struct {
				Type       string `json:"@type"`
				RetryDelay string `json:"retryDelay"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(firstOfArray(body), &e) != nil {
		return 0, false
	}
	for _, d := range e.Error.Details {
		if !strings.HasSuffix(d.Type, "google.rpc.RetryInfo") || !strings.HasSuffix(d.RetryDelay, "s") {
			continue
		}
		if wait, err := time.ParseDuration(d.RetryDelay); err == nil && wait >= 0 {
			return wait, true
		}
	}
	return 0, false
}

// jsonScalar is a JSON string's text, or another value's JSON ("429"), or ""
// for null or nothing.
func jsonScalar(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	if v := strings.TrimSpace(string(raw)); v != "null" {
		return v
	}
	return ""
}

// retryableStatus is openai-go's status policy: timeouts, lock conflicts,
// rate limits and server errors (x-should-retry overrides it).
func retryableStatus(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500
}

// retryAfter reads the wait a provider asked for as openai-go does:
// retry-after-ms, then Retry-After (seconds or an RFC 1123 date). A negative
// or non-finite number is skipped; a number too large for a Duration is the
// longest Duration. ok is false when no header gives a wait.
func retryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	for _, hdr := range [...]struct {
		name string
		unit time.Duration
	}{{"Retry-After-Ms", time.Millisecond}, {"Retry-After", time.Second}} {
		v := h.Get(hdr.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseFloat(v, 64)
		if errors.Is(err, strconv.ErrRange) && math.IsInf(n, 1) {
			return math.MaxInt64, true
		}
		if err == nil {
			if math.IsNaN(n) || math.IsInf(n, 0) || n < 0 {
				continue
			}
			if n*float64(hdr.unit) >= math.MaxInt64 {
				return math.MaxInt64, true
			}
			return time.Duration(n * float64(hdr.unit)), true
		}
		if hdr.unit == time.Second {
			if t, err := time.Parse(time.RFC1123, v); err == nil {
				return max(t.Sub(now), 0), true // a date already past means now
			}
		}
	}
	return 0, false
}

// nonRetryable wraps err so that errors.Is(result, ErrNonRetryable) holds.
func nonRetryable(err error) error {
	return fmt.Errorf("%w (%w)", err, ErrNonRetryable)
}
