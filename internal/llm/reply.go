package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrBadReply marks a 2xx reply that is not a chat completion: an empty
// body, HTML or text (a login page, a web UI at the wrong path), an event
// stream nobody asked for, JSON that cannot be read as a completion, or one
// larger than Config.MaxReplyBytes. It is not retried: the same request to
// the same endpoint gets the same answer.
var ErrBadReply = errors.New("llm: unusable reply")

// DefaultMaxReplyBytes bounds the body of one reply (Config.MaxReplyBytes).
// A model's longest answers are a few MiB; the bound is there so that a
// server that never stops sending cannot exhaust the worker's memory.
const DefaultMaxReplyBytes = 64 << 20

// snippetMax bounds the part of a bad reply quoted in its error.
const snippetMax = 200

// errReplyTooLarge is roundTrip's failure on a body beyond the bound.
var errReplyTooLarge = errors.New("reply too large")

// utf8BOM is sent by a few servers before the JSON (encoding/json rejects it).
var utf8BOM = []byte("\xef\xbb\xbf")

// judgeReply checks a 2xx reply's body before openai-go decodes it. It
// returns nil for a body openai-go can read; for one it cannot, the error
// to report. An error object in a 2xx body (OpenRouter, LiteLLM and other
// proxies relay an upstream failure so) is an *APIError with InReply set,
// whose Status is the HTTP status its code names, if any: openai-go then
// judges that status as it would the real one (so a relayed 429 or 503 is
// retried).
func judgeReply(res *http.Response, body []byte) error {
	trimmed := bytes.TrimSpace(body)
	ctype := res.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ctype)
	switch {
	case len(trimmed) == 0:
		return nonRetryable(fmt.Errorf("%w (status %d): an empty body", ErrBadReply, res.StatusCode))
	case mt == "text/event-stream":
		return nonRetryable(fmt.Errorf("%w (status %d): an event stream (Content-Type %s), though no stream was asked for: %s",
			ErrBadReply, res.StatusCode, ctype, snippet(trimmed)))
	case trimmed[0] != '{':
		hint := ""
		if mt == "text/html" || bytes.HasPrefix(trimmed, []byte("<")) {
			hint = "; a web page: is BaseURL the API's root, such as http://host:port/v1?"
		}
		if ctype == "" {
			ctype = "none"
		}
		return nonRetryable(fmt.Errorf("%w (status %d): not a JSON object (Content-Type %s%s): %s",
			ErrBadReply, res.StatusCode, ctype, hint, snippet(trimmed)))
	}
	if e := errorInReply(res, trimmed); e != nil {
		return e
	}
	return nil
}

// errorInReply reads an error object from a 2xx body: {"error": {...}} or
// {"error": "text"} without choices, or vLLM's {"object": "error",
// "message": ...}. Bodies above 64 KiB are not read for one: error bodies
// are small, and completions are read by openai-go.
func errorInReply(res *http.Response, body []byte) *APIError {
	// Every error shape has an "error" key or value; a completion without
	// the word is not parsed twice (about 15 µs for 2 KB).
	if len(body) > 64<<10 || !bytes.Contains(body, []byte(`"error"`)) {
		return nil
	}
	var probe struct {
		Choices json.RawMessage `json:"choices"`
		Error   json.RawMessage `json:"error"`
		Object  string          `json:"object"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	}
	if json.Unmarshal(body, &probe) != nil {
		return nil
	}
	if c := bytes.TrimSpace(probe.Choices); len(c) > 0 && !bytes.Equal(c, []byte("null")) && !bytes.Equal(c, []byte("[]")) {
		return nil
	}
	e := &APIError{Status: res.StatusCode, InReply: true}
	switch errVal := bytes.TrimSpace(probe.Error); {
	case len(errVal) > 0 && !bytes.Equal(errVal, []byte("null")):
		e.Message, e.Type, e.Code = providerMessage(body)
	case probe.Object == "error":
		e.Message, e.Type, e.Code = probe.Message, probe.Type, jsonScalar(probe.Code)
		if e.Message == "" {
			e.Message = strings.ToValidUTF8(string(body), "")
		}
	default:
		return nil
	}
	if n, err := strconv.Atoi(e.Code); err == nil && n >= 400 && n <= 599 {
		e.Status = n
	}
	e.Retryable = e.Status != res.StatusCode && retryableStatus(e.Status)
	switch res.Header.Get("X-Should-Retry") { // compared as openai-go does
	case "true":
		e.Retryable = true
	case "false":
		e.Retryable = false
	}
	e.RetryAfter, e.HasRetryAfter = retryAfter(res.Header, time.Now())
	return e
}

// asErrorReply turns res, a 2xx reply judged unusable as err, into the
// error reply openai-go should see: the status err names (502 when it
// names none), and x-should-retry saying whether err may be retried, so
// the SDK's own retry loop decides and waits, and never decodes the body.
func asErrorReply(res *http.Response, err error) *http.Response {
	out := *res
	out.Header = res.Header.Clone()
	out.StatusCode = http.StatusBadGateway
	var apiErr *APIError
	if errors.As(err, &apiErr) && apiErr.Status >= 400 {
		out.StatusCode = apiErr.Status
	}
	out.Status = fmt.Sprintf("%d %s", out.StatusCode, http.StatusText(out.StatusCode))
	out.Header.Set("X-Should-Retry", strconv.FormatBool(!errors.Is(err, ErrNonRetryable)))
	return &out
}

// decodeFailure is the error for a 2xx reply openai-go could not decode.
func decodeFailure(err error, status int, body []byte) error {
	return nonRetryable(fmt.Errorf("%w (status %d): not a chat completion (%w): %s", ErrBadReply, status, err, snippet(bytes.TrimSpace(body))))
}

// readBounded reads r to its end, failing past max bytes.
func readBounded(r io.Reader, max int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > max {
		return nil, errReplyTooLarge
	}
	return body, nil
}

// snippet quotes the start of b for an error message.
func snippet(b []byte) string {
	if len(b) <= snippetMax {
		return strconv.Quote(strings.ToValidUTF8(string(b), "\uFFFD"))
	}
	cut := snippetMax
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return strconv.Quote(strings.ToValidUTF8(string(b[:cut]), "\uFFFD")) + fmt.Sprintf("... (%d bytes)", len(b))
}
