package agentrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/cfgerr"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/journal"
	"github.com/jetagent/jetagent/internal/reflect"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// ErrConfig wraps every invalid configuration.
var ErrConfig = errors.New("agentrun: invalid configuration")

// DefaultClientToolTimeout bounds the wait for a submitter's answer.
const DefaultClientToolTimeout = time.Minute

// Config configures a Runner.
type Config struct {
	// Loop runs the jobs (required).
	Loop *agentloop.Loop
	// Pool gives each job its view of the MCP servers (nil: none configured).
	Pool *toolcache.Pool
	// Model names the model of jobs that set none, in their transcripts.
	Model string
	// ClientToolTimeout bounds the wait for the submitter's answer to a
	// client tool call (default DefaultClientToolTimeout).
	ClientToolTimeout time.Duration
	// Logger receives operational logs (default: discarded).
	Logger *slog.Logger
}

// WithDefaults returns c with its zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	if c.ClientToolTimeout == 0 {
		c.ClientToolTimeout = DefaultClientToolTimeout
	}
	return c
}

// Validate checks c as given, without Loop and Pool. Errors are
// *cfgerr.FieldError naming the field, wrapping ErrConfig.
func (c Config) Validate() error {
	if c.ClientToolTimeout <= 0 {
		return cfgerr.Field(ErrConfig, "ClientToolTimeout", "client tool timeout", "must be positive (got %s)", c.ClientToolTimeout)
	}
	return nil
}

// Runner runs jobs with the agent loop. It implements jobs.Runner and is
// safe for concurrent use.
type Runner struct {
	cfg Config
	log *slog.Logger
}

var _ jobs.Runner = (*Runner)(nil)

// New validates cfg and returns a Runner.
func New(cfg Config) (*Runner, error) {
	if cfg.Loop == nil {
		return nil, cfgerr.Field(ErrConfig, "Loop", "", "a Loop is required")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Runner{cfg: cfg, log: log}, nil
}

// Run runs one attempt of job.
func (r *Runner) Run(ctx context.Context, job *jobs.Job, env jobs.RunEnv) (*jobs.Outcome, error) {
	log := r.log.With("job", job.ID, "attempt", env.Attempt())
	in := agentloop.Input{
		JobID: job.ID, Task: job.Task, System: job.System, Model: job.Model,
		Mode: agentloop.Mode(job.ToolMode), MaxRounds: job.MaxRounds, History: job.History,
		ClientTools: offeredClientTools(job),
	}
	if r.cfg.Pool != nil {
		view, err := r.cfg.Pool.View(job.ID, job.Servers, job.Allow, job.Deny)
		if err != nil {
			return nil, err
		}
		if err := namedServersDown(view, job.Servers); err != nil {
			_ = view.Close()
			return nil, jobs.Retryable(err)
		}
		defer view.Close() //nolint:errcheck // closing per-job sessions; nothing to do on failure
		in.Tools = view
	}
	if len(in.ClientTools) > 0 {
		caller, err := clienttools.NewCaller(env.Conn(), job.ID, job.ClientSecret, clienttools.Options{
			Prefix: env.Names().Prefix, Timeout: r.cfg.ClientToolTimeout,
		})
		if err != nil {
			return nil, err
		}
		in.ClientCaller = caller.CallText
	}
	in.Sink = agentloop.SinkFunc(func(ctx context.Context, e agentloop.Event) {
		var data any
		if e.Data != nil {
			data = e.Data
		}
		if err := env.Emit(ctx, e.Type, e.Round, data); err != nil {
			log.Warn("event lost", "type", e.Type, "err", err)
		}
	})
	prior, err := env.LoadJournal(ctx)
	if err != nil {
		// Without it a completed call could run again: another attempt.
		return nil, jobs.Retryable(err)
	}
	if in.Journal, err = journal.New(env.Journal(), prior); err != nil {
		return nil, err
	}
	// No per-round checkpoint: the journal holds every round's answer and
	// every call's result, from which a resumed attempt replays the job
	// without the model or the tools (one write a round less). A
	// checkpoint an older worker left is still resumed from.
	cp, err := loadCheckpoint(ctx, env)
	if err != nil {
		log.Warn("checkpoint unreadable; starting over", "err", err)
	} else if cp != nil {
		in.Resume = cp
		log.Info("resuming from checkpoint", "round", cp.Round)
	}

	res, err := r.cfg.Loop.Run(ctx, in)
	var out *jobs.Outcome
	if res != nil {
		// The reflected transcript is a continuation's history: what the
		// job door refuses must not be in it (wellFormed).
		out = &jobs.Outcome{Result: *res, Reflected: wellFormed(reflect.Rewrite(res.Messages, res.Records)), Model: job.Model}
		if out.Model == "" {
			out.Model = r.cfg.Model
		}
		for _, ig := range reflect.Ignore(res.Records) {
			log.Warn("record not reflected", "record", ig.Record.ID, "reason", ig.Reason)
		}
	}
	if err != nil {
		return out, classify(err)
	}
	return out, nil
}

// namedServersDown is the error of a job that names servers (not "every
// server") of which one cannot offer a tool: it failed to connect, or is
// still connecting, and has never listed its tools (View.Unavailable, the
// rule by which the loop also tells the model of such a server). Run
// anyway, the job was offered none of that server's tools and no one was
// told: the model answered without them and the job succeeded. Another
// attempt (after the worker's retry delay) finds the server back, or the
// job is dead-lettered with this reason once its deliveries are used up.
// A server that listed its tools before it failed still offers them (its
// calls fail with the reason), and a server that is up with no tools is no
// fault.
func namedServersDown(v *toolcache.View, names []string) error {
	if len(names) == 0 {
		return nil
	}
	var down []string
	for _, st := range v.Unavailable() {
		what := fmt.Sprintf("%q is %s", st.Name, st.State)
		if st.Error != "" {
			what += ": " + st.Error
		}
		down = append(down, what)
	}
	if len(down) == 0 {
		return nil
	}
	return fmt.Errorf("the job's MCP server %s, with no tools to offer", strings.Join(down, "; "))
}

// loadCheckpoint returns the checkpoint of an earlier attempt, or nil.
func loadCheckpoint(ctx context.Context, env jobs.RunEnv) (*agentloop.Checkpoint, error) {
	b, err := env.LoadCheckpoint(ctx)
	if err != nil || b == nil {
		return nil, err
	}
	var cp agentloop.Checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return &cp, nil
}
