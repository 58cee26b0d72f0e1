package llm

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jetagent/jetagent/internal/cfgerr"
	"github.com/jetagent/jetagent/internal/redact"
)

// Defaults applied by New for zero Config fields.
const (
	DefaultMaxRetries    = 4
	DefaultTimeout       = 5 * time.Minute
	DefaultMaxRetryDelay = 2 * time.Minute
)

// Config selects the endpoint and the retry policy. Retrying is openai-go's
// (see the package doc); these fields set its options.
type Config struct {
	// BaseURL is the API root including the version path, e.g.
	// "https://api.openai.com/v1" or "http://localhost:11434/v1"; a trailing
	// slash is optional.
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none (local servers).
	APIKey string
	// Model is used when a Request names none.
	Model string
	// Timeout bounds each attempt, reading the reply included (0:
	// DefaultTimeout; negative: none). An attempt that runs out of it fails
	// with ErrTimeout and is retried.
	Timeout time.Duration
	// MaxRetries is the number of retries after the first attempt
	// (0: DefaultMaxRetries; negative: no retries).
	MaxRetries int
	// MaxRetryDelay bounds each wait between attempts (0:
	// DefaultMaxRetryDelay). Without a Retry-After, openai-go waits 0.5 s,
	// 1 s, 2 s... (less up to a quarter of jitter), at most MaxRetryDelay; a
	// provider's Retry-After or retry-after-ms (or the retryDelay of a
	// Google error body) replaces that wait, and one
	// longer than MaxRetryDelay ends the retries at once with the provider's
	// error (still Retryable: the job can come back later).
	MaxRetryDelay time.Duration
	// MaxReplyBytes bounds the body of one reply (0: DefaultMaxReplyBytes).
	// A longer reply fails with ErrBadReply and is not retried.
	MaxReplyBytes int64
	// Headers are added to every request (e.g. OpenRouter's HTTP-Referer).
	Headers map[string]string
	// HTTPClient sends the requests (nil: a client on http.DefaultTransport
	// that follows redirects within BaseURL's origin only: openai-go
	// refuses the others, so the key never goes elsewhere, and the
	// redirect fails the request without retries).
	HTTPClient *http.Client
	// OnRetry, if set, is called when an attempt failed and openai-go will
	// try again, before it waits: attempt is the 1-based attempt that failed,
	// err its failure, delay the provider's Retry-After when it sent one,
	// else the SDK's backoff before jitter (the longest the wait can be). It
	// runs on the goroutine that called Complete.
	OnRetry func(attempt int, delay time.Duration, err error)
}

// ErrConfig is wrapped by every configuration error from New.
var ErrConfig = errors.New("llm: invalid config")

// Validate checks cfg as New would. Errors are *cfgerr.FieldError naming
// the field, wrapping ErrConfig.
func (cfg Config) Validate() error {
	_, err := cfg.withDefaults()
	return err
}

// withDefaults validates cfg and fills zero fields.
func (cfg Config) withDefaults() (Config, error) {
	base, err := normaliseBaseURL(cfg.BaseURL)
	if err != nil {
		return cfg, err
	}
	cfg.BaseURL = base
	if strings.TrimSpace(cfg.Model) == "" {
		return cfg, cfgerr.Field(ErrConfig, "Model", "Model", "is required")
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = DefaultMaxRetries
	} else if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxRetryDelay < 0 {
		return cfg, cfgerr.Field(ErrConfig, "MaxRetryDelay", "MaxRetryDelay", "must not be negative (got %s)", cfg.MaxRetryDelay)
	}
	if cfg.MaxReplyBytes < 0 {
		return cfg, cfgerr.Field(ErrConfig, "MaxReplyBytes", "MaxReplyBytes", "must not be negative (got %d)", cfg.MaxReplyBytes)
	}
	if cfg.MaxReplyBytes == 0 {
		cfg.MaxReplyBytes = DefaultMaxReplyBytes
	}
	if cfg.MaxRetryDelay == 0 {
		cfg.MaxRetryDelay = DefaultMaxRetryDelay
	}
	if cfg.HTTPClient == nil {
		// The shared default transport, not a private one: connections are
		// pooled process-wide and nothing lingers per Client.
		cfg.HTTPClient = &http.Client{Transport: http.DefaultTransport, CheckRedirect: sameOriginRedirects}
	}
	return cfg, nil
}

// sameOriginRedirects follows at most 10 redirects within the first
// request's scheme, host and port; a redirect elsewhere is returned as the
// reply (which the client then reports, see attempts.observe).
func sameOriginRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if first := via[0].URL; req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
		return http.ErrUseLastResponse
	}
	return nil
}

// normaliseBaseURL returns base with exactly one trailing slash, the form
// openai-go resolves "chat/completions" against.
func normaliseBaseURL(base string) (string, error) {
	base = strings.TrimSpace(base)
	if base == "" {
		return "", cfgerr.Field(ErrConfig, "BaseURL", "BaseURL", "is required")
	}
	shown := redact.URL(base) // errors are printed and logged
	u, err := url.Parse(base)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the rest quotes base whole
		}
		return "", cfgerr.Field(ErrConfig, "BaseURL", "BaseURL", "%q is not a URL: %v", shown, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", cfgerr.Field(ErrConfig, "BaseURL", "BaseURL", "%q must be an absolute http(s) URL", shown)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		hint := ""
		if u.Query().Has("api-version") {
			// Azure OpenAI's deployment URL, which its portal shows: its
			// v1 API needs no api-version and takes the key as a bearer.
			hint = fmt.Sprintf(" (for Azure OpenAI use its v1 API, %s://%s/openai/v1, with the deployment's name as the model)", u.Scheme, u.Host)
		}
		return "", cfgerr.Field(ErrConfig, "BaseURL", "BaseURL", "%q must not have a query or fragment%s", shown, hint)
	}
	return strings.TrimRight(base, "/") + "/", nil
}
