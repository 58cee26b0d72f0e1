package codemode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// ServeChild runs the one execution a Process runner sends on stdin,
// answering on stdout, and returns the exit code: call it first thing in
// main when IsChild, and exit with it. It never returns while the
// parent waits for an answer: when stdin ends (the parent is gone or
// gave up) the process exits at once.
func ServeChild(stdin io.Reader, stdout io.Writer) int {
	// The worker's shutdown signals are the worker's: Ctrl-C signals the
	// whole process group, systemd's stop every process of the unit, a
	// closed terminal SIGHUP to the group, and
	// the worker lets running jobs finish; a child dying of them failed
	// its script mid-way. The worker ends a child by closing its stdin
	// or killing it.
	signal.Ignore(os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	r := bufio.NewReaderSize(stdin, 64<<10)
	line, err := r.ReadBytes('\n')
	if err != nil {
		fmt.Fprintln(os.Stderr, "codemode child: no execution to run:", err)
		return 2
	}
	var st childStart
	if err := json.Unmarshal(line, &st); err != nil {
		fmt.Fprintln(os.Stderr, "codemode child: bad start:", err)
		return 2
	}
	lim := st.Limits.limits().withDefaults()
	limitAddressSpace(procMemory(lim))
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	h := &childHost{w: stdout, replies: make(chan frame, 1)}
	go func() {
		for {
			f, err := readFrame(r, 1<<62)
			if err != nil {
				// The parent is gone: nobody wants the result, and a
				// runtime stuck in a built-in must not outlive it.
				os.Exit(3)
			}
			if f.Op == "cancel" {
				cancel(errors.New(f.Error))
				continue
			}
			h.replies <- f
		}
	}()
	out := NewCatalog(st.Tools).Run(ctx, st.Code, h, lim)
	done := frame{Op: "done", Text: out.Text, Calls: out.Calls}
	if out.Err != nil {
		done.Err = wireErr(out.Err, ctx, h.aborted)
	}
	if err := h.send(done); err != nil {
		return 3
	}
	return 0
}

// wireErr classifies an execution's error for the parent.
func wireErr(err error, ctx context.Context, aborted bool) *childErr {
	var le *LimitError
	var ab *abortError
	switch {
	case errors.As(err, &le):
		return &childErr{Kind: "limit", Limit: le.Limit, Message: err.Error()}
	case aborted || errors.As(err, &ab): // a Call's Abort ends the run with its cause, unwrapped
		return &childErr{Kind: "abort", Message: err.Error()}
	case ctx.Err() != nil:
		return &childErr{Kind: "cancel", Message: err.Error()}
	}
	return &childErr{Kind: "error", Message: err.Error()}
}

// childHost is the Host of an execution in a child: each method asks
// the parent and waits for its answer (Run calls them one at a time).
type childHost struct {
	mu      sync.Mutex // guards w
	w       io.Writer
	replies chan frame
	aborted bool // a Call returned an Abort (Run calls one at a time)
}

func (h *childHost) send(f frame) error {
	b, err := marshalFrame(f)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return writeFrame(h.w, b)
}

// ask sends f and waits for the parent's answer.
func (h *childHost) ask(f frame) frame {
	if err := h.send(f); err != nil {
		os.Exit(3) // the parent is gone
	}
	return <-h.replies
}

func (h *childHost) Call(ctx context.Context, seq int, name string, args json.RawMessage) (Result, error) {
	if err := h.send(frame{Op: "call", Seq: seq, Name: name, Args: args}); err != nil {
		os.Exit(3)
	}
	var r frame
	select {
	case r = <-h.replies:
	case <-ctx.Done():
		// Stopped (wall time, a limit, cancelled): the parent cancels
		// the call's context, and its Host answers promptly.
		_ = h.send(frame{Op: "cancelcall"})
		r = <-h.replies
	}
	switch {
	case r.Abort:
		h.aborted = true
		return Result{}, Abort(errors.New(r.Error))
	case r.Error != "" || r.Result == nil:
		return Result{}, errors.New(r.Error)
	}
	return *r.Result, nil
}

// Now and Random panic when the parent's Host did, with its value: the
// session turns that into the Abort it makes in process.
func (h *childHost) Now(seq int) int64 {
	r := h.ask(frame{Op: "now", Seq: seq})
	if r.Abort {
		panic(r.Error)
	}
	return r.Now
}

func (h *childHost) Random(seq int) float64 {
	r := h.ask(frame{Op: "random", Seq: seq})
	if r.Abort {
		panic(r.Error)
	}
	return r.Random
}

func (h *childHost) Explain(name string) string { return h.ask(frame{Op: "explain", Name: name}).Text }
