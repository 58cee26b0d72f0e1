package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/clienttools"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/reflect"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// agentRunner runs jobs with the agent loop: it is the bridge between the
// job pipeline (jobs.Runner, RunEnv) and the loop (Input, Sink,
// CheckpointStore), MCP (a toolcache View per job) and client tools.
type agentRunner struct {
	loop          *agentloop.Loop
	pool          *toolcache.Pool // nil: no MCP servers configured
	system        string
	model         string // the default model, for transcripts of jobs that name none
	clientTimeout time.Duration
	log           *slog.Logger
}

func (r *agentRunner) Run(ctx context.Context, job *jobs.Job, env jobs.RunEnv) (*jobs.Outcome, error) {
	in := agentloop.Input{
		JobID: job.ID, Task: job.Task, System: job.System, Model: job.Model,
		Mode: agentloop.Mode(job.ToolMode), MaxRounds: job.MaxRounds, History: job.History,
	}
	// The default prompt applies unless the job sets its own or continues
	// a conversation that has one (a transcript as history).
	if in.System == "" && (len(job.History) == 0 || job.History[0].Role != llm.RoleSystem) {
		in.System = r.system
	}
	if r.pool != nil {
		view, err := r.pool.View(job.ID, job.Servers, job.Allow, job.Deny)
		if err != nil {
			return nil, err
		}
		defer view.Close() //nolint:errcheck // closing per-job sessions; nothing to do on failure
		in.Tools = view
	}
	if len(job.ClientTools) > 0 {
		caller, err := clienttools.NewCaller(env.Conn(), job.ID, job.ClientSecret, clienttools.Options{
			Prefix: env.Names().Prefix, Timeout: r.clientTimeout,
		})
		if err != nil {
			return nil, err
		}
		for _, ct := range job.ClientTools {
			in.ClientTools = append(in.ClientTools, agentloop.ClientTool{Name: ct.Name, Description: ct.Description, InputSchema: ct.InputSchema})
		}
		in.ClientCaller = caller.CallText
	}
	in.Sink = agentloop.SinkFunc(func(ctx context.Context, e agentloop.Event) {
		var data any
		if e.Data != nil {
			data = e.Data
		}
		if err := env.Emit(ctx, e.Type, e.Round, data); err != nil {
			r.log.Warn("event lost", "job", job.ID, "type", e.Type, "err", err)
		}
	})
	in.Checkpoints = checkpoints{env}
	if b, err := env.LoadCheckpoint(ctx); err != nil {
		r.log.Warn("checkpoint unreadable; starting over", "job", job.ID, "err", err)
	} else if b != nil {
		var st agentloop.State
		if err := json.Unmarshal(b, &st); err != nil {
			r.log.Warn("checkpoint unreadable; starting over", "job", job.ID, "err", err)
		} else {
			in.Resume = &st
			r.log.Info("resuming from checkpoint", "job", job.ID, "round", st.Round)
		}
	}

	res, err := r.loop.Run(ctx, in)
	var out *jobs.Outcome
	if res != nil {
		out = &jobs.Outcome{
			Answer: res.Answer, Messages: res.Messages, Records: res.Records,
			Reflected: reflect.Rewrite(res.Messages, res.Records),
			Usage: jobs.Usage{
				Usage: res.Usage.Usage, ToolDefTokens: res.Usage.ToolDefTokens,
				FullModeToolDefTokens: res.Usage.FullModeToolDefTokens,
			},
			Rounds: res.Rounds, StopReason: res.StopReason, Mode: string(res.Mode), Model: job.Model,
		}
		if out.Model == "" {
			out.Model = r.model
		}
		for _, ig := range reflect.Ignore(res.Records) {
			r.log.Warn("record not reflected", "job", job.ID, "record", ig.Record.ID, "reason", ig.Reason)
		}
	}
	if err != nil {
		return out, classify(err)
	}
	return out, nil
}

// admitClientTools refuses, at the door, a job whose client tool
// declarations are invalid or beyond clienttools' size limits: such a job
// is dead-lettered with the reason instead of failing once it runs.
func admitClientTools(j *jobs.Job) error {
	if len(j.ClientTools) == 0 {
		return nil
	}
	decls := make([]clienttools.Decl, len(j.ClientTools))
	for i, ct := range j.ClientTools {
		decls[i] = clienttools.Decl{Name: ct.Name, Description: ct.Description, InputSchema: ct.InputSchema}
	}
	return clienttools.ValidateDecls(decls, clienttools.DeclLimits{})
}

// classify marks errors another attempt may fix (the provider overloaded
// or timing out even after the client's own retries) as Retryable: the job
// goes back to the queue with a delay and resumes from its checkpoint.
func classify(err error) error {
	var api *llm.APIError
	var netErr *net.OpError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err // the worker knows why (cancel, timeout, shutdown)
	case errors.Is(err, llm.ErrTimeout):
		return jobs.Retryable(err)
	case errors.As(err, &api) && api.Retryable:
		return jobs.Retryable(err)
	case errors.As(err, &netErr): // the provider is unreachable
		return jobs.Retryable(err)
	}
	return err
}

// checkpoints stores the loop's state after each round beside the transcript.
type checkpoints struct{ env jobs.RunEnv }

func (c checkpoints) Save(ctx context.Context, s agentloop.State) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return c.env.SaveCheckpoint(ctx, b)
}
