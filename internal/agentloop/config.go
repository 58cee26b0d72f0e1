package agentloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// Mode is how a job's tools are offered to the model.
type Mode string

// Tool modes. See the package documentation for what each sends.
const (
	ModeAuto     Mode = "auto"
	ModeFull     Mode = "full"
	ModeDeferred Mode = "deferred"
	ModeSearch   Mode = "search"
	ModeCode     Mode = "code"
)

// Valid reports whether m names a known mode ("" is not valid; callers
// substitute the configured default first).
func (m Mode) Valid() bool {
	switch m {
	case ModeAuto, ModeFull, ModeDeferred, ModeSearch, ModeCode:
		return true
	}
	return false
}

// Defaults applied by New to zero Config fields.
const (
	DefaultMaxRoundsCap     = 50
	DefaultMaxRounds        = 10
	DefaultMaxToolOutput    = 16 << 10
	DefaultSchemaRetries    = 1
	DefaultMaxParallelCalls = 4
	// Auto mode: full definitions up to DefaultDeferredAbove tokens are sent
	// whole; up to DefaultSearchAbove they are deferred; above, search mode.
	DefaultDeferredAbove = 3000
	DefaultSearchAbove   = 25000
)

// Sentinel errors.
var (
	// ErrConfig wraps every configuration or input validation failure.
	ErrConfig = errors.New("agentloop: invalid configuration")
	// ErrModeNotImplemented is returned for code mode until codemode is wired.
	ErrModeNotImplemented = errors.New("agentloop: tool mode not implemented")
	// ErrEmptyResponse: the model answered nothing, even after a nudge.
	ErrEmptyResponse = errors.New("agentloop: model returned an empty response")
	// ErrRefused: the provider stopped the answer (finish_reason
	// content_filter) or the model refused (the message's refusal field).
	ErrRefused = errors.New("agentloop: model refused (content filter)")
)

// Completer is the model: *llm.Client implements it.
type Completer interface {
	Complete(ctx context.Context, req llm.Request) (llm.Response, error)
}

// ToolSet is a job's view of the tool registry: *toolcache.View implements it.
type ToolSet interface {
	Tools() []toolcache.Tool
	CallTool(ctx context.Context, name string, args json.RawMessage) (toolcache.Result, error)
	ListResources(ctx context.Context) ([]toolcache.Resource, error)
	ReadResource(ctx context.Context, uriOrName string) (string, error)
}

// AutoThresholds choose a mode by the token cost of the full definitions.
type AutoThresholds struct {
	// DeferredAbove: full definitions costing more tokens than this are deferred.
	DeferredAbove int
	// SearchAbove: full definitions costing more than this switch to search mode.
	SearchAbove int
}

// Config configures a Loop. Zero fields take the Default* values.
type Config struct {
	LLM              Completer
	DefaultMode      Mode
	MaxRoundsCap     int
	DefaultMaxRounds int
	AutoThresholds   AutoThresholds
	// MaxToolOutput is the byte size above which a tool's output is
	// truncated for the model (the tool.result event keeps all of it).
	MaxToolOutput int
	// SchemaRetries bounds ephemeral retries after invalid tool calls.
	// Negative disables them (0 means the default, 1).
	SchemaRetries    int
	MaxParallelCalls int
}

// Loop runs agent jobs. It holds no per-job state and is safe for
// concurrent use by many jobs.
type Loop struct {
	cfg    Config
	tokens tokenCache
}

// New validates cfg, fills defaults and returns a Loop.
func New(cfg Config) (*Loop, error) {
	if cfg.LLM == nil {
		return nil, fmt.Errorf("%w: LLM is required", ErrConfig)
	}
	if cfg.DefaultMaxRounds == 0 && cfg.MaxRoundsCap > 0 {
		// Unset, the default yields to a lower cap rather than failing.
		cfg.DefaultMaxRounds = min(DefaultMaxRounds, cfg.MaxRoundsCap)
	}
	if cfg.DefaultMode == "" {
		cfg.DefaultMode = ModeAuto
	}
	if !cfg.DefaultMode.Valid() {
		return nil, fmt.Errorf("%w: unknown default mode %q", ErrConfig, cfg.DefaultMode)
	}
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"MaxRoundsCap", &cfg.MaxRoundsCap, DefaultMaxRoundsCap},
		{"DefaultMaxRounds", &cfg.DefaultMaxRounds, DefaultMaxRounds},
		{"MaxToolOutput", &cfg.MaxToolOutput, DefaultMaxToolOutput},
		{"MaxParallelCalls", &cfg.MaxParallelCalls, DefaultMaxParallelCalls},
		{"AutoThresholds.DeferredAbove", &cfg.AutoThresholds.DeferredAbove, DefaultDeferredAbove},
		{"AutoThresholds.SearchAbove", &cfg.AutoThresholds.SearchAbove, DefaultSearchAbove},
	} {
		if *f.v < 0 {
			return nil, fmt.Errorf("%w: %s must not be negative (got %d)", ErrConfig, f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	switch {
	case cfg.SchemaRetries == 0:
		cfg.SchemaRetries = DefaultSchemaRetries
	case cfg.SchemaRetries < 0:
		cfg.SchemaRetries = 0
	}
	if cfg.DefaultMaxRounds > cfg.MaxRoundsCap {
		return nil, fmt.Errorf("%w: DefaultMaxRounds %d exceeds MaxRoundsCap %d", ErrConfig, cfg.DefaultMaxRounds, cfg.MaxRoundsCap)
	}
	if cfg.AutoThresholds.SearchAbove < cfg.AutoThresholds.DeferredAbove {
		return nil, fmt.Errorf("%w: AutoThresholds.SearchAbove %d is below DeferredAbove %d",
			ErrConfig, cfg.AutoThresholds.SearchAbove, cfg.AutoThresholds.DeferredAbove)
	}
	if cfg.MaxToolOutput < 256 {
		return nil, fmt.Errorf("%w: MaxToolOutput %d is too small (minimum 256 bytes)", ErrConfig, cfg.MaxToolOutput)
	}
	return &Loop{cfg: cfg}, nil
}

// Choose resolves auto mode: it returns the mode for a catalog whose full
// definitions cost fullTokens.
func (t AutoThresholds) Choose(fullTokens int) Mode {
	switch {
	case fullTokens <= t.DeferredAbove:
		return ModeFull
	case fullTokens <= t.SearchAbove:
		return ModeDeferred
	default:
		return ModeSearch
	}
}

// DefaultAutoThresholds returns the thresholds New uses when none are configured.
func DefaultAutoThresholds() AutoThresholds {
	return AutoThresholds{DeferredAbove: DefaultDeferredAbove, SearchAbove: DefaultSearchAbove}
}
