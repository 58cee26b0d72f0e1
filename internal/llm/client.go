package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/jetagent/jetagent/internal/redact"
)

// Client sends chat-completions requests; openai-go retries them (see the
// package doc). It is safe for concurrent use.
type Client struct {
	cfg  Config
	chat openai.ChatCompletionService
}

// New validates cfg and returns a client.
func New(cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// The service is built directly rather than through openai.NewClient,
	// which would fold OPENAI_* environment variables into every request.
	//
	// The per-attempt timeout is not option.WithRequestTimeout: openai-go
	// (v3.98) ends its retry loop when that timeout expires and returns
	// context.DeadlineExceeded, so a hung attempt would never be retried and
	// would look like the caller's own deadline. attempts.observe applies
	// Config.Timeout inside the loop instead (see there).
	opts := cfg.requestOptions()
	chat := openai.NewChatCompletionService(opts...)
	return &Client{cfg: cfg, chat: chat}, nil
}

// Model is the default model requests use.
func (c *Client) Model() string { return c.cfg.Model }

// BaseURL is the normalised base URL (with one trailing slash).
func (c *Client) BaseURL() string { return c.cfg.BaseURL }

// Complete sends req, which openai-go retries on transient failures (see the
// package doc), and returns the reply (its choices merged, see Response).
// An empty req.Model uses the configured model.
func (c *Client) Complete(ctx context.Context, req Request) (Response, error) {
	params, err := toParams(req, c.cfg.Model)
	if err != nil {
		return Response{}, nonRetryable(fmt.Errorf("llm: encoding request: %w", err))
	}
	a := &attempts{cfg: &c.cfg}
	completion, err := c.chat.New(ctx, params, option.WithMiddleware(a.observe))
	if err == nil {
		resp, err := fromCompletion(completion)
		if err != nil {
			return Response{}, nonRetryable(err)
		}
		return resp, nil
	}
	if ctx.Err() != nil {
		if a.retrying != nil {
			return Response{}, fmt.Errorf("llm: stopped waiting to retry after %q: %w", a.retrying.Error(), context.Cause(ctx))
		}
		return Response{}, fmt.Errorf("llm: %w", context.Cause(ctx))
	}
	switch {
	case a.last == nil && a.status != 0:
		// The SDK could not decode a 2xx reply, which another attempt
		// would not change.
		return Response{}, decodeFailure(err, a.status, a.body)
	case a.last == nil:
		// No attempt failed as such: the SDK could not build the request.
		return Response{}, nonRetryable(fmt.Errorf("llm: %w", err))
	case errors.Is(a.last, ErrNonRetryable):
		return Response{}, a.last
	case a.tooLong > 0:
		return Response{}, fmt.Errorf("llm: giving up after %s: %w (the provider asked to wait %s, beyond MaxRetryDelay %s)",
			attemptsText(a.n), a.last, a.tooLong, c.cfg.MaxRetryDelay)
	default:
		return Response{}, fmt.Errorf("llm: giving up after %s: %w", attemptsText(a.n), a.last)
	}
}

// attemptsText says how many requests were made: "1 attempt (not
// retried)" when the first failure ended the retries.
func attemptsText(n int) string {
	if n == 1 {
		return "1 attempt (not retried)"
	}
	return fmt.Sprintf("%d attempts", n)
}

// attempts is an openai-go middleware that sees every attempt of one
// Complete call: openai-go runs it inside its retry loop, once per attempt,
// on Complete's goroutine.
type attempts struct {
	cfg *Config
	// n counts the attempts started.
	n int
	// last is the latest attempt's failure (nil: it succeeded, or the
	// caller's context ended it).
	last error
	// retrying is last when openai-go is about to wait and try again.
	retrying error
	// tooLong is a Retry-After beyond MaxRetryDelay, which ended the retries.
	tooLong time.Duration
	// status and body are the latest 2xx reply's, for the error when
	// openai-go cannot decode it.
	status int
	body   []byte
}

// observe makes one attempt under Config.Timeout, reading the whole body
// within it, and records the outcome. A timeout or connection failure is
// returned as an error without a response, which openai-go retries like any
// transport error; an HTTP error reply is passed on for openai-go to judge
// by its status, x-should-retry and Retry-After.
func (a *attempts) observe(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	a.n++
	a.last, a.retrying, a.tooLong, a.status, a.body = nil, nil, 0, 0, nil
	ctx := req.Context()
	actx, cancel := ctx, context.CancelFunc(func() {})
	if a.cfg.Timeout > 0 {
		actx, cancel = context.WithTimeout(ctx, a.cfg.Timeout)
	}
	defer cancel()
	res, body, err := roundTrip(req.WithContext(actx), next, a.cfg.MaxReplyBytes)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err() // the caller's cancellation or deadline; openai-go stops
	case errors.Is(err, errReplyTooLarge):
		// Not retried: the same request would get the same flood.
		err = nonRetryable(fmt.Errorf("%w (status %d): a body larger than %d bytes (MaxReplyBytes)", ErrBadReply, res.StatusCode, a.cfg.MaxReplyBytes))
		a.failed(err)
		return asErrorReply(res, err), nil
	case err != nil && actx.Err() != nil:
		err = fmt.Errorf("%w after %s", ErrTimeout, a.cfg.Timeout)
		a.failed(err)
		return nil, err
	case err != nil:
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			// net/http hides a password, not a bare user part (a token);
			// the error ends up in the job's state and events.
			ue.URL = redact.URL(ue.URL)
		}
		err = fmt.Errorf("%w: %w", ErrConnection, err)
		a.failed(err)
		return nil, err
	case res.StatusCode >= 400:
		if _, ok := retryAfter(res.Header, time.Now()); !ok {
			if wait, ok := googleRetryDelay(body); ok {
				// openai-go waits as the headers say: the body's wait
				// becomes one, so the SDK honours it (and MaxRetryDelay).
				res.Header.Set("Retry-After-Ms", strconv.FormatInt(wait.Milliseconds(), 10))
			}
		}
		e := newAPIError(res, body)
		e.Hint = versionlessHint(e.Status, a.cfg.BaseURL)
		a.failed(e)
	case res.StatusCode >= 300 && res.StatusCode < 400:
		// A redirect the client did not follow (the default one follows
		// none to another origin, see Config.HTTPClient): the same
		// request would get it again.
		err := nonRetryable(fmt.Errorf("%w (status %d): a redirect to %q, not followed (set BaseURL to the API's own URL)",
			ErrBadReply, res.StatusCode, redact.URL(res.Header.Get("Location")))) // a signed Location's token stays out of the job's error
		a.failed(err)
		return asErrorReply(res, err), nil
	case res.StatusCode >= 200:
		a.status, a.body = res.StatusCode, body
		if err := judgeReply(res, body); err != nil {
			// openai-go sees an error reply whose status and
			// x-should-retry say what to do, and retries (or not) itself.
			a.failed(err)
			return asErrorReply(res, err), nil
		}
		// A JSON object sent as text/plain (or with no type) is read as
		// JSON: openai-go decodes only a JSON media type.
		if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "application/json" && !strings.HasSuffix(mt, "+json") {
			res.Header.Set("Content-Type", "application/json")
		}
	}
	return res, nil
}

// roundTrip sends req and reads the whole response body (at most max
// bytes, else errReplyTooLarge with res), which it leaves readable again
// in res, less a leading UTF-8 byte order mark.
func roundTrip(req *http.Request, next option.MiddlewareNext, max int64) (res *http.Response, body []byte, err error) {
	res, err = next(req)
	if err != nil {
		return nil, nil, err
	}
	body, err = readBounded(res.Body, max)
	_ = res.Body.Close()
	if errors.Is(err, errReplyTooLarge) {
		res.Body = http.NoBody
		return res, nil, err
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the response: %w", err)
	}
	body = bytes.TrimPrefix(body, utf8BOM)
	res.Body = io.NopCloser(bytes.NewReader(body))
	return res, body, nil
}

// failed records err as the latest attempt's failure and, when openai-go
// will retry it, reports the retry through Config.OnRetry before the wait.
func (a *attempts) failed(err error) {
	a.last = err
	if errors.Is(err, ErrNonRetryable) || a.n > a.cfg.MaxRetries {
		return
	}
	// The wait openai-go chooses: the provider's, if it named one (a wait
	// beyond MaxRetryDelay ends the retries), else its own backoff.
	delay := sdkBackoff(a.n-1, a.cfg.MaxRetryDelay)
	if apiErr := (*APIError)(nil); errors.As(err, &apiErr) && apiErr.HasRetryAfter {
		if apiErr.RetryAfter > a.cfg.MaxRetryDelay {
			a.tooLong = apiErr.RetryAfter
			return
		}
		delay = apiErr.RetryAfter
	}
	a.retrying = err
	if a.cfg.OnRetry != nil {
		a.cfg.OnRetry(a.n, delay, err)
	}
}

// sdkBackoff is openai-go's wait before its retry number retryCount+1 when
// the provider names none: 0.5 s doubling per retry, at most maxDelay. The
// SDK then takes off up to a quarter as jitter, so this is the longest the
// wait can be.
func sdkBackoff(retryCount int, maxDelay time.Duration) time.Duration {
	d := 500 * time.Millisecond
	for range retryCount {
		if d >= maxDelay {
			break
		}
		d *= 2
	}
	return min(d, maxDelay)
}

// requestOptions are the openai-go options of every service built from
// cfg (chat completions, embeddings): endpoint, key, HTTP client, the
// client's own retries and the configured headers.
func (cfg Config) requestOptions() []option.RequestOption {
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithAPIKey(cfg.APIKey),
		option.WithHTTPClient(cfg.HTTPClient),
		option.WithMaxRetries(cfg.MaxRetries),
		option.WithMaxRetryDelay(cfg.MaxRetryDelay),
	}
	// In name order: of two names that differ only in case, the last
	// sets the header, the same one on every run.
	for _, k := range slices.Sorted(maps.Keys(cfg.Headers)) {
		opts = append(opts, option.WithHeader(k, cfg.Headers[k]))
	}
	return opts
}
