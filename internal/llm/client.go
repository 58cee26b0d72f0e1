package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Client sends chat-completions requests with retries. It is safe for
// concurrent use.
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
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithAPIKey(cfg.APIKey),
		option.WithHTTPClient(cfg.HTTPClient),
		option.WithMaxRetries(0), // retries are ours: see Complete
	}
	for k, v := range cfg.Headers {
		opts = append(opts, option.WithHeader(k, v))
	}
	chat := openai.NewChatCompletionService(opts...)
	return &Client{cfg: cfg, chat: chat}, nil
}

// Model is the default model requests use.
func (c *Client) Model() string { return c.cfg.Model }

// BaseURL is the normalised base URL (with one trailing slash).
func (c *Client) BaseURL() string { return c.cfg.BaseURL }

// Complete sends req, retrying transient failures (see the package doc), and
// returns the first choice. An empty req.Model uses the configured model.
func (c *Client) Complete(ctx context.Context, req Request) (Response, error) {
	params, err := toParams(req, c.cfg.Model)
	if err != nil {
		return Response{}, nonRetryable(fmt.Errorf("llm: encoding request: %w", err))
	}
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(c.cfg.MinBackoff),
		backoff.WithMaxInterval(c.cfg.MaxBackoff),
		backoff.WithMaxElapsedTime(0), // bounded by MaxRetries and ctx instead
	)
	for attempt := 1; ; attempt++ {
		resp, err := c.attempt(ctx, params)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return Response{}, fmt.Errorf("llm: %w", context.Cause(ctx))
		}
		if errors.Is(err, ErrNonRetryable) {
			return Response{}, err
		}
		if attempt > c.cfg.MaxRetries {
			return Response{}, fmt.Errorf("llm: giving up after %d attempts: %w", attempt, err)
		}
		delay := b.NextBackOff()
		if apiErr := (*APIError)(nil); errors.As(err, &apiErr) && apiErr.HasRetryAfter {
			// The provider knows its rate window better than our backoff.
			delay = min(apiErr.RetryAfter, c.cfg.MaxRetryAfter)
		}
		if c.cfg.OnRetry != nil {
			c.cfg.OnRetry(attempt, delay, err)
		}
		if sleep(ctx, delay) != nil {
			return Response{}, fmt.Errorf("llm: stopped waiting to retry after %q: %w", err.Error(), context.Cause(ctx))
		}
	}
}

// attempt makes one request; errors that another attempt would not fix wrap
// ErrNonRetryable.
func (c *Client) attempt(ctx context.Context, params openai.ChatCompletionNewParams) (Response, error) {
	actx := ctx
	if c.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, c.cfg.Timeout)
		defer cancel()
	}
	var httpResp *http.Response
	completion, err := c.chat.New(actx, params, option.WithResponseInto(&httpResp))
	if err == nil {
		resp, err := fromCompletion(completion)
		if err != nil {
			return Response{}, nonRetryable(err)
		}
		return resp, nil
	}
	if ctx.Err() != nil {
		return Response{}, err // the caller's cancellation; Complete reports it
	}
	if actx.Err() != nil {
		return Response{}, fmt.Errorf("%w after %s", ErrTimeout, c.cfg.Timeout)
	}
	if httpResp != nil && httpResp.StatusCode >= 400 {
		return Response{}, newAPIError(httpResp, err)
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return Response{}, fmt.Errorf("llm: connection: %w", err)
	}
	// Anything else (e.g. an undecodable 200 body) would fail the same way again.
	return Response{}, nonRetryable(fmt.Errorf("llm: %w", err))
}

// newAPIError builds an APIError from the HTTP response; openai-go leaves the
// body readable on error responses.
func newAPIError(res *http.Response, sdkErr error) *APIError {
	e := &APIError{Status: res.StatusCode, Retryable: retryableStatus(res.StatusCode)}
	e.RetryAfter, e.HasRetryAfter = retryAfter(res.Header, time.Now())
	switch strings.ToLower(res.Header.Get("X-Should-Retry")) {
	case "true":
		e.Retryable = true
	case "false":
		e.Retryable = false
	}
	var oerr *openai.Error
	if errors.As(sdkErr, &oerr) {
		e.Message, e.Type, e.Code = oerr.Message, oerr.Type, oerr.Code
	}
	if e.Message == "" && res.Body != nil {
		// Not OpenAI-shaped ({"detail":...}, plain text): keep the body itself.
		body, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
		e.Message = strings.TrimSpace(string(body))
	}
	return e
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
