package llm

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults applied by New for zero Config fields.
const (
	DefaultMaxRetries    = 4
	DefaultTimeout       = 5 * time.Minute
	DefaultMinBackoff    = 500 * time.Millisecond
	DefaultMaxBackoff    = 30 * time.Second
	DefaultMaxRetryAfter = 2 * time.Minute
)

// Config selects the endpoint and the retry policy.
type Config struct {
	// BaseURL is the API root including the version path, e.g.
	// "https://api.openai.com/v1" or "http://localhost:11434/v1"; a trailing
	// slash is optional.
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none (local servers).
	APIKey string
	// Model is used when a Request names none.
	Model string
	// Timeout bounds each attempt (0: DefaultTimeout; negative: none).
	Timeout time.Duration
	// MaxRetries is the number of retries after the first attempt
	// (0: DefaultMaxRetries; negative: no retries).
	MaxRetries int
	// MinBackoff and MaxBackoff bound the exponential backoff between
	// attempts (0: DefaultMinBackoff, DefaultMaxBackoff).
	MinBackoff, MaxBackoff time.Duration
	// MaxRetryAfter caps a provider's Retry-After wait (0: DefaultMaxRetryAfter).
	MaxRetryAfter time.Duration
	// Headers are added to every request (e.g. OpenRouter's HTTP-Referer).
	Headers map[string]string
	// HTTPClient sends the requests (nil: a client on http.DefaultTransport).
	HTTPClient *http.Client
	// OnRetry, if set, is called before each wait between attempts: attempt
	// is the 1-based attempt that failed, delay the wait about to start.
	OnRetry func(attempt int, delay time.Duration, err error)
}

// ErrConfig is wrapped by every configuration error from New.
var ErrConfig = errors.New("llm: invalid config")

// withDefaults validates cfg and fills zero fields.
func (cfg Config) withDefaults() (Config, error) {
	base, err := normaliseBaseURL(cfg.BaseURL)
	if err != nil {
		return cfg, err
	}
	cfg.BaseURL = base
	if strings.TrimSpace(cfg.Model) == "" {
		return cfg, fmt.Errorf("%w: model is required", ErrConfig)
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = DefaultMaxRetries
	} else if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MinBackoff < 0 || cfg.MaxBackoff < 0 || cfg.MaxRetryAfter < 0 {
		return cfg, fmt.Errorf("%w: negative backoff", ErrConfig)
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.MinBackoff)
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		return cfg, fmt.Errorf("%w: max backoff %s is below min backoff %s", ErrConfig, cfg.MaxBackoff, cfg.MinBackoff)
	}
	if cfg.MaxRetryAfter == 0 {
		cfg.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if cfg.HTTPClient == nil {
		// The shared default transport, not a private one: connections are
		// pooled process-wide and nothing lingers per Client.
		cfg.HTTPClient = &http.Client{Transport: http.DefaultTransport}
	}
	return cfg, nil
}

// normaliseBaseURL returns base with exactly one trailing slash, the form
// openai-go resolves "chat/completions" against.
func normaliseBaseURL(base string) (string, error) {
	base = strings.TrimSpace(base)
	if base == "" {
		return "", fmt.Errorf("%w: base URL is required", ErrConfig)
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("%w: base URL: %w", ErrConfig, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%w: base URL %q must be an absolute http(s) URL", ErrConfig, base)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%w: base URL %q must not have a query or fragment", ErrConfig, base)
	}
	return strings.TrimRight(base, "/") + "/", nil
}
