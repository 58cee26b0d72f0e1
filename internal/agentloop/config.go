package agentloop

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/jetagent/jetagent/internal/cfgerr"
	"github.com/jetagent/jetagent/internal/codemode"
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

// BuiltinTools are the names of the tools the loop answers itself, in any
// mode: no client tool may take one (clienttools.DeclLimits.Reserved).
// execute_code is reserved for code mode.
func BuiltinTools() []string {
	return []string{ToolSearchTools, ToolGetToolDetails, ToolCallTool, ToolListResources, ToolReadResource, "execute_code"}
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
	// ErrEmptyResponse: the model answered nothing, even after a nudge.
	ErrEmptyResponse = errors.New("agentloop: model returned an empty response")
	// ErrRefused: the provider stopped the answer (finish_reason
	// content_filter, or another server's name for it) or the model
	// refused (the message's refusal field).
	ErrRefused = errors.New("agentloop: model refused")
	// ErrTruncated: the reply was cut off at the model's output token
	// limit (finish_reason length) before it held a whole answer or any
	// tool call. Asking again would hit the same limit.
	ErrTruncated = errors.New("agentloop: the model's reply was cut off at its output token limit")
	// ErrReplyAbandoned: the server reported that it gave up on the
	// generation (finish_reason error, abort, or DeepSeek's
	// insufficient_system_resource): another attempt may succeed.
	ErrReplyAbandoned = errors.New("agentloop: the model server abandoned the reply")
	// ErrMalformedCall: the model's answer was a tool call written into
	// the text that could not be read, or one the server could not read
	// (finish_reason MALFORMED_FUNCTION_CALL), and so was its reply to
	// the corrective request. The error's text after the colon says which.
	ErrMalformedCall = errors.New("agentloop: the model wrote a tool call into its answer that could not be read, also when asked again")
)

// StoppedError is the error of a job whose context ended (its timeout,
// a cancel, the worker's shutdown): Err is the context's error, While
// what the job was doing then ("waiting for the model's reply in round
// 2", "running the tool calls of round 1 (echo)"), so that the worker's
// own reason ("job timed out after 5m") can say what was cut short.
type StoppedError struct {
	Err   error
	While string
}

func (e *StoppedError) Error() string {
	if e.While == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + " while " + e.While
}

func (e *StoppedError) Unwrap() error { return e.Err }

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
	// CodeAbove, when positive, lets auto pick code mode for full
	// definitions costing more than this (at least SearchAbove). Zero: auto
	// never picks code mode; an operator enables it.
	CodeAbove int
}

// Config configures a Loop. Zero fields take the Default* values.
type Config struct {
	LLM              Completer
	DefaultMode      Mode
	MaxRoundsCap     int
	DefaultMaxRounds int
	AutoThresholds   AutoThresholds
	// DefaultSystem is the system prompt of a job that sets none and whose
	// history has none (see Input.System for the whole rule).
	DefaultSystem string
	// MaxToolOutput is the byte size above which a tool's output is
	// truncated for the model (the tool.result event keeps all of it).
	MaxToolOutput int
	// SchemaRetries bounds ephemeral retries after invalid tool calls.
	// Negative disables them (0 means the default, 1).
	SchemaRetries    int
	MaxParallelCalls int
	// ContentCalls says, per model, whether tool calls written into the
	// content are read (zero: auto for every model).
	ContentCalls ContentCalls
	// CodeLimits bound each execute_code run (zero fields: codemode's
	// defaults). MaxOutput is taken as at most MaxToolOutput less room for
	// an error message (1 KiB, or a quarter of a smaller MaxToolOutput),
	// so that codemode's own cut, with its markers and the final value's
	// share, is the only one the model's view of an execution gets.
	CodeLimits codemode.Limits
	// CodeRunner runs each execute_code execution; nil runs it in this
	// process (codemode.Catalog.Run). The worker gives codemode.Process,
	// so that a script no limit stops in process ends only its child.
	CodeRunner codemode.Runner
	// Logger logs what the model is not shown: the stack of a tool call
	// that panicked inside the worker (the call fails with the panic's
	// value). Nil: slog.Default().
	Logger *slog.Logger
}

// Loop runs agent jobs. It holds no per-job state and is safe for
// concurrent use by many jobs.
type Loop struct {
	cfg    Config
	tokens tokenCache
}

// WithDefaults returns c with its zero fields set to the defaults. An unset
// DefaultMaxRounds yields to a MaxRoundsCap below DefaultMaxRounds.
func (c Config) WithDefaults() Config {
	if c.DefaultMaxRounds == 0 && c.MaxRoundsCap > 0 {
		c.DefaultMaxRounds = min(DefaultMaxRounds, c.MaxRoundsCap)
	}
	if c.DefaultMode == "" {
		c.DefaultMode = ModeAuto
	}
	for _, f := range []struct {
		v   *int
		def int
	}{
		{&c.MaxRoundsCap, DefaultMaxRoundsCap},
		{&c.DefaultMaxRounds, DefaultMaxRounds},
		{&c.MaxToolOutput, DefaultMaxToolOutput},
		{&c.MaxParallelCalls, DefaultMaxParallelCalls},
		{&c.AutoThresholds.DeferredAbove, DefaultDeferredAbove},
		{&c.AutoThresholds.SearchAbove, DefaultSearchAbove},
	} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if c.SchemaRetries == 0 {
		c.SchemaRetries = DefaultSchemaRetries
	}
	c.ContentCalls = c.ContentCalls.WithDefaults()
	return c
}

// Validate checks c as given, without LLM (apply WithDefaults first for
// zero fields). Errors are *cfgerr.FieldError naming the field, wrapping
// ErrConfig.
func (c Config) Validate() error {
	bad := func(fields []string, format string, a ...any) error {
		return cfgerr.Fields(ErrConfig, fields, "", format, a...)
	}
	if !c.DefaultMode.Valid() {
		// code is a mode too (the message predated it, and sent operators away from it)
		return bad([]string{"DefaultMode"}, "%q is not auto, full, deferred, search or code", c.DefaultMode)
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"MaxRoundsCap", c.MaxRoundsCap},
		{"DefaultMaxRounds", c.DefaultMaxRounds},
		{"MaxParallelCalls", c.MaxParallelCalls},
		{"AutoThresholds.DeferredAbove", c.AutoThresholds.DeferredAbove},
		{"AutoThresholds.SearchAbove", c.AutoThresholds.SearchAbove},
	} {
		if f.v < 1 {
			return cfgerr.Field(ErrConfig, f.name, f.name, "must be at least 1 (got %d)", f.v)
		}
	}
	if c.DefaultMaxRounds > c.MaxRoundsCap {
		return cfgerr.Fields(ErrConfig, []string{"DefaultMaxRounds", "MaxRoundsCap"}, "DefaultMaxRounds",
			"%d exceeds MaxRoundsCap %d", c.DefaultMaxRounds, c.MaxRoundsCap)
	}
	if c.AutoThresholds.CodeAbove < 0 || (c.AutoThresholds.CodeAbove > 0 && c.AutoThresholds.CodeAbove < c.AutoThresholds.SearchAbove) {
		return cfgerr.Fields(ErrConfig, []string{"AutoThresholds.CodeAbove", "AutoThresholds.SearchAbove"}, "AutoThresholds.CodeAbove",
			"%d must be 0 (off) or at least SearchAbove %d", c.AutoThresholds.CodeAbove, c.AutoThresholds.SearchAbove)
	}
	if c.AutoThresholds.SearchAbove < c.AutoThresholds.DeferredAbove {
		return cfgerr.Fields(ErrConfig, []string{"AutoThresholds.SearchAbove", "AutoThresholds.DeferredAbove"}, "AutoThresholds.SearchAbove",
			"%d is below DeferredAbove %d", c.AutoThresholds.SearchAbove, c.AutoThresholds.DeferredAbove)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"CodeLimits.WallTime", int64(c.CodeLimits.WallTime)}, {"CodeLimits.MaxCalls", int64(c.CodeLimits.MaxCalls)},
		{"CodeLimits.MaxOutput", int64(c.CodeLimits.MaxOutput)}, {"CodeLimits.MaxStackDepth", int64(c.CodeLimits.MaxStackDepth)},
		{"CodeLimits.MaxMemory", c.CodeLimits.MaxMemory}, {"CodeLimits.MaxCode", int64(c.CodeLimits.MaxCode)},
	} {
		if f.v < 0 {
			return cfgerr.Field(ErrConfig, f.name, f.name, "must not be negative (0: the default)")
		}
	}
	if c.MaxToolOutput < 256 {
		return cfgerr.Field(ErrConfig, "MaxToolOutput", "MaxToolOutput", "%d is too small (minimum 256 bytes)", c.MaxToolOutput)
	}
	return c.ContentCalls.validate()
}

// New validates cfg, fills defaults and returns a Loop.
func New(cfg Config) (*Loop, error) {
	if cfg.LLM == nil {
		return nil, cfgerr.Field(ErrConfig, "LLM", "", "LLM is required")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.SchemaRetries = max(cfg.SchemaRetries, 0)
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
	case t.CodeAbove > 0 && fullTokens > t.CodeAbove:
		return ModeCode
	default:
		return ModeSearch
	}
}

// DefaultAutoThresholds returns the thresholds New uses when none are configured.
func DefaultAutoThresholds() AutoThresholds {
	return AutoThresholds{DeferredAbove: DefaultDeferredAbove, SearchAbove: DefaultSearchAbove}
}
