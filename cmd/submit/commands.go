package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/jetagent/jetagent/internal/jobs"
)

// idCommand is "NAME [flags] ID": --json, the flags extra adds, and one
// job id for do.
func (c *cli) idCommand(name, short string, extra func(*pflag.FlagSet), do func(id string, asJSON bool) (int, error)) *command {
	fs := newFlagSet(name)
	asJSON := fs.Bool("json", false, "machine-readable output (JSON)")
	if extra != nil {
		extra(fs)
	}
	return &command{name: name, use: "[flags] ID", short: short, flags: fs,
		run: func(pos []string) (int, error) {
			if len(pos) != 1 {
				return 0, usagef("%s takes one job id", name)
			}
			if !jobs.ValidID(pos[0]) { // no such job can exist: watch would wait for ever
				return 0, usagef("%q is not a job id (1 to 128 letters, digits, _ and -)", pos[0])
			}
			return do(pos[0], *asJSON)
		}}
}

func (c *cli) transcriptCommand() *command {
	var raw bool
	return c.idCommand("transcript", "the stored transcript (reflected; --raw: what the model saw)",
		func(fs *pflag.FlagSet) {
			fs.BoolVar(&raw, "raw", false, "the raw transcript (what the model saw)")
		},
		func(id string, asJSON bool) (int, error) { return c.transcript(id, raw, asJSON) })
}

func (c *cli) status(id string, asJSON bool) (int, error) {
	cl, err := c.connect()
	if err != nil {
		return 0, err
	}
	st, err := cl.Status(c.ctx, id)
	if errors.Is(err, jobs.ErrNotFound) {
		// "job not found: X" alone: a job published by hand (nats pub)
		// has no state until a worker takes it, and looked lost.
		return 0, fmt.Errorf("job not found: %s has no state%sa job published without submit has one "+
			"once a worker takes it: submit watch --wait %s waits for it)", id, c.checkID(cl, id), id)
	}
	if err != nil {
		return 0, err
	}
	if st, err = cl.FullState(c.ctx, st); err != nil { // an answer too large for the state
		return 0, err
	}
	if st.Status == jobs.StatusQueued {
		c.warnUnserved(cl, st.Queue) // why a job stays queued
	}
	if asJSON {
		return exitOK, writeJSON(c.stdout, st)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	row := func(k string, v any) {
		if s := fmt.Sprint(v); s != "" && s != "0" {
			fmt.Fprintf(tw, "%s\t%s\n", k, shown(s)) // a task, an error, an answer: anyone's text
		}
	}
	row("id", st.ID)
	row("status", st.Status)
	row("queue", st.Queue)
	row("attempt", st.Attempt)
	row("worker", st.Worker)
	row("task", st.Task)
	row("error", st.Error)
	if st.CancelRequested {
		row("cancel", "requested")
	}
	for _, t := range []struct {
		k string
		v time.Time
	}{{"created", st.CreatedAt}, {"started", st.StartedAt}, {"finished", st.FinishedAt}} {
		if !t.v.IsZero() {
			row(t.k, t.v.Local().Format(time.RFC3339))
		}
	}
	if r := st.Result; r != nil {
		if r.Usage != nil {
			row("tokens", fmt.Sprintf("%d prompt, %d completion, %d tool definitions", r.Usage.PromptTokens, r.Usage.CompletionTokens, r.Usage.ToolDefTokens))
		}
		row("rounds", r.Rounds)
		row("mode", r.Mode)
		row("transcript", r.Transcript)
		row("answer", oneLine(r.Answer, 500))
	}
	return exitOK, tw.Flush()
}

func (c *cli) watchCommand() *command {
	var wait bool
	var localMCP string
	return c.idCommand("watch", "follow a job's events until it ends", func(fs *pflag.FlagSet) {
		fs.BoolVar(&wait, "wait", false, "wait for a job that has no state yet (one about to be submitted)")
		fs.StringVar(&localMCP, "local-mcp", "", "answer the job's client tools again from the local MCP servers in `FILE` "+
			"(a submit --local-mcp that stopped before the job ended)")
	}, func(id string, asJSON bool) (int, error) { return c.watch(id, wait, localMCP, asJSON) })
}

// checkID opens what a "no state" error says after the id's name: the
// ids of jobs it is likely a typo of, or "check the id"; a parenthesis
// is left open for the rest.
func (c *cli) checkID(cl *jobs.Client, id string) string {
	ids := cl.SimilarIDs(c.ctx, id)
	switch len(ids) {
	case 0:
		return " (check the id; "
	case 1:
		return ": did you mean " + ids[0] + "? ("
	}
	return ": did you mean one of " + strings.Join(ids, ", ") + "? ("
}

// errNoJob: watch was given an id no job has (without --wait).
var errNoJob = errors.New("no such job")

func (c *cli) watch(id string, wait bool, localMCP string, asJSON bool) (int, error) {
	if wait && localMCP != "" {
		// The secret is read from the job's message, which its state
		// names.
		return 0, usagef("--local-mcp answers a job that has a state: drop --wait")
	}
	cl, err := c.connect()
	if err != nil {
		return 0, err
	}
	st, err := cl.Status(c.ctx, id)
	switch {
	case errors.Is(err, jobs.ErrNotFound) && !wait:
		// A mistyped id would otherwise wait for ever.
		return exitFailed, fmt.Errorf("%w: %s has no state%sa job published without submit has one "+
			"once a worker takes it: submit watch --wait %s waits for it)", errNoJob, id, c.checkID(cl, id), id)
	case errors.Is(err, jobs.ErrNotFound):
		if !asJSON {
			fmt.Fprintf(c.stderr, "no job %s yet; waiting for it (--wait)\n", id)
		}
	case err != nil:
		return exitFailed, err
	}
	if localMCP == "" || st == nil || st.Status.Terminal() {
		return c.follow(cl, id, asJSON, "") // an ended job has nothing left to ask
	}
	stop, err := c.reattachLocalMCP(cl, st, localMCP)
	if err != nil {
		return 0, err
	}
	defer stop()
	if !asJSON {
		fmt.Fprintf(c.stderr, "answering the client tools of job %s from %s again\n", id, localMCP)
	}
	return c.follow(cl, id, asJSON, localMCP)
}

func (c *cli) transcript(id string, raw, asJSON bool) (int, error) {
	cl, err := c.connect()
	if err != nil {
		return 0, err
	}
	b, err := cl.Transcript(c.ctx, id, raw)
	if errors.Is(err, jobs.ErrNotFound) {
		return 0, c.noTranscript(cl, id)
	}
	if err != nil {
		return 0, err
	}
	if asJSON {
		_, err := fmt.Fprintf(c.stdout, "%s\n", b)
		return exitOK, err
	}
	var t jobs.Transcript
	if err := json.Unmarshal(b, &t); err != nil {
		return 0, fmt.Errorf("transcript of %s: %w", id, err)
	}
	writeTranscript(c.stdout, &t)
	return exitOK, nil
}

// noTranscript says why a job has no transcript.
func (c *cli) noTranscript(cl *jobs.Client, id string) error {
	st, err := cl.Status(c.ctx, id)
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return fmt.Errorf("no job %s%sno state, no transcript)", id, c.checkID(cl, id))
	case err != nil:
		return err
	case !st.Status.Terminal():
		return fmt.Errorf("job %s is %s: its transcript is stored when it ends (submit watch %s)", id, st.Status, id)
	case st.Result != nil && st.Result.TranscriptError != "":
		return fmt.Errorf("job %s ended %s without a transcript: the worker could not store it: %s", id, st.Status, st.Result.TranscriptError)
	case st.Error != "":
		return fmt.Errorf("job %s ended %s without a transcript: %s", id, st.Status, st.Error)
	default:
		return fmt.Errorf("job %s ended %s without a transcript", id, st.Status)
	}
}

// cancelWait bounds how long cancel waits for the job to stop.
const cancelWait = 30 * time.Second

func (c *cli) cancel(id string, asJSON bool) (int, error) {
	cl, err := c.connect()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(c.ctx, cancelWait)
	defer cancel()
	st, err := cl.Cancel(ctx, id)
	if errors.Is(err, jobs.ErrNotFound) {
		// Said as "job not found: X", the job published by hand and not
		// yet taken (no state) looked gone, and it ran later all the same.
		return 0, fmt.Errorf("job not found: %s has no state, so nothing to cancel%sa job published without submit "+
			"has none until a worker takes it, and nothing can cancel it before then: delete its message from %s "+
			"with nats stream rmm %s SEQ, SEQ the sequence its publish was acknowledged with)",
			id, c.checkID(cl, id), cl.Names().JobsStream(), cl.Names().JobsStream())
	}
	if err != nil && c.ctx.Err() != nil {
		// Ctrl-C while waiting for the job to stop said only "context
		// canceled": whether the cancel was made is read back.
		sctx, stop := context.WithTimeout(context.WithoutCancel(c.ctx), 5*time.Second)
		defer stop()
		if cur, serr := cl.Status(sctx, id); serr == nil && (cur.CancelRequested || cur.Status == jobs.StatusCancelled) {
			return exitFailed, fmt.Errorf("stopped waiting; job %s is %s and its cancel stands: it stops when its worker "+
				"or its next attempt sees it (submit status %s)", id, cur.Status, id)
		}
		return exitFailed, fmt.Errorf("interrupted before the cancel of %s was recorded (submit status %s; submit cancel %s again)", id, id, id)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return exitFailed, fmt.Errorf("cancel of %s requested, but it has not stopped within %s; its worker may be gone: "+
			"the next attempt will see the request (submit status %s)", id, cancelWait, id)
	}
	if err != nil {
		return 0, err
	}
	if asJSON {
		if err := writeJSON(c.stdout, st); err != nil {
			return exitFailed, err
		}
	} else if st.Status == jobs.StatusCancelled {
		fmt.Fprintf(c.stdout, "job %s cancelled\n", id)
	} else {
		fmt.Fprintf(c.stderr, "job %s had already ended: %s\n", id, st.Status)
	}
	if st.Status != jobs.StatusCancelled {
		return exitFailed, nil
	}
	return exitOK, nil
}
