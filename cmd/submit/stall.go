package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/jobs"
)

// aliveEvery is how often a followed running job's worker is asked
// whether it still runs the job (the wire contract's liveness request).
const aliveEvery = 10 * time.Second

// aliveWait bounds one such request: the worker answers at once.
const aliveWait = 2 * time.Second

// watchOwner tells the user, once an attempt, when the worker its state
// names stops answering for a running job: a worker killed mid-job left
// submit waiting in silence, for ever when no other worker came, with a
// job the state still called running. A queued job while no worker runs
// at all is told once too (until a worker comes), and so is a queued job
// whose message the jobs stream no longer holds. It returns a stop
// function that waits for its goroutine.
func (c *cli) watchOwner(cl *jobs.Client, id string) (stop func()) {
	return c.watchStalls(cl, func() []string { return []string{id} }, func(s string) { fmt.Fprintln(c.stderr, s) }, false)
}

// waiting is the set of jobs a batch waits for, for watchStalls: a batch
// waited in silence for jobs no worker ran (none running, or the worker
// killed), which one followed job is told of.
type waiting struct {
	mu  sync.Mutex
	ids []string
}

func (w *waiting) add(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ids = append(w.ids, id)
}

func (w *waiting) remove(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ids = slices.DeleteFunc(w.ids, func(s string) bool { return s == id })
}

func (w *waiting) list() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ids)
}

// watchStalls looks every aliveEvery at the jobs ids lists and says each
// stall once with say: a running job whose worker does not answer (once
// an attempt), no worker running at all while a job waits queued (once,
// again after workers came and went), and a queued job whose message is
// gone from the jobs stream (seen twice in a row with its state unchanged).
// batch words the no-worker notice for several jobs.
func (c *cli) watchStalls(cl *jobs.Client, ids func() []string, say func(string), batch bool) (stop func()) {
	ctx, cancel := context.WithCancel(c.ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		told := map[string]int{}        // a job's attempt already reported silent
		goneRev := map[string]uint64{}  // a job's state revision found without its message
		toldGone := map[string]uint64{} // ... and reported
		toldIdle := false               // no worker at all, reported
		// Off once a message could not be read while its state could (a
		// user the server refuses $JS.API.STREAM.MSG.GET): a refused
		// request goes unanswered, so each look would wait for its timeout.
		readMsgs := true
		tick := time.NewTicker(aliveEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			askedIdle := false
			for _, id := range ids() {
				var st *jobs.State
				var rev uint64
				var gone bool
				var err error
				if readMsgs {
					st, rev, gone, err = cl.QueuedMessageGone(ctx, id)
					readMsgs = err == nil || st == nil
				} else {
					st, _ = cl.Status(ctx, id)
				}
				if ctx.Err() != nil {
					return
				}
				if st == nil {
					continue
				}
				switch st.Status {
				case jobs.StatusQueued:
					if !gone {
						delete(goneRev, id)
					} else if seen, ok := goneRev[id]; !ok || seen != rev {
						goneRev[id] = rev // gone for an instant as a worker refuses it: look again
					} else if toldGone[id] != rev {
						toldGone[id] = rev
						say(fmt.Sprintf("submit: job %s is queued, but its message (%s sequence %d) is no longer in the stream: "+
							"it was purged or deleted, or went with the stream (nats stream purge, rmm or rm), so no worker will run it, "+
							"and its id cannot be submitted again. submit cancel %s ends it; submit the task again under another id "+
							"(submit goes on waiting; Ctrl-C stops following)", id, cl.Names().JobsStream(), st.StreamSeq, id))
					}
					if askedIdle {
						continue
					}
					askedIdle = true // one request tells for every job
					none, ok := c.noWorker(ctx, cl, id)
					if !ok {
						continue
					}
					if none && !toldIdle {
						if batch {
							say(fmt.Sprintf("submit: no worker is running (none answers on %s): the batch's queued jobs wait until "+
								"a worker of their queue starts (submit goes on waiting; Ctrl-C stops waiting, not the jobs)",
								cl.Names().AliveWildcard()))
						} else {
							say(fmt.Sprintf("submit: no worker is running (none answers on %s): job %s waits queued until a worker "+
								"of queue %s starts (submit goes on waiting; Ctrl-C stops following, not the job)",
								cl.Names().AliveWildcard(), id, queueOf(st)))
						}
					}
					toldIdle = none // told again after workers come and go
				case jobs.StatusRunning:
					st, ok := c.silentOwner(ctx, cl, st)
					if !ok || st.Attempt == told[id] {
						continue
					}
					told[id] = st.Attempt
					say(fmt.Sprintf("submit: worker %s running job %s (attempt %d) does not answer: it may have stopped. "+
						"The job is not lost: after the ack wait (JETAGENT_ACK_WAIT) a worker of queue %s runs it again; with none "+
						"running it waits for one (submit goes on waiting; Ctrl-C stops following, not the job)", st.Worker, id, st.Attempt, queueOf(st)))
				}
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// silentOwner is the job's state when st, its state, is running and the
// worker it names did not answer the liveness request, read again after
// the request so that a job that ended or moved on meanwhile is not
// reported.
func (c *cli) silentOwner(ctx context.Context, cl *jobs.Client, st *jobs.State) (*jobs.State, bool) {
	if st.Status != jobs.StatusRunning || c.nc == nil || !c.nc.IsConnected() {
		return nil, false
	}
	rctx, cancel := context.WithTimeout(ctx, aliveWait)
	_, err := c.nc.RequestWithContext(rctx, cl.Names().AliveSubject(st.ID), nil)
	cancel()
	if err == nil || ctx.Err() != nil || !c.nc.IsConnected() ||
		(!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, nats.ErrTimeout)) {
		return nil, false
	}
	now, err := cl.Status(ctx, st.ID)
	if err != nil || now.Status != jobs.StatusRunning || now.Attempt != st.Attempt || now.Worker != st.Worker {
		return nil, false
	}
	return now, true
}

// noWorker reports, for queued job id, whether no worker at all is
// running: every worker subscribes to the liveness requests, so one for
// the job is told at once that nothing listens (a queued job's own is
// not answered even by a live worker, which runs other jobs or none).
// A job that waits on a queue no live worker serves while others run is
// not told apart: the workers' queues are not known here. ok is false
// when nothing could be told.
func (c *cli) noWorker(ctx context.Context, cl *jobs.Client, id string) (none, ok bool) {
	if c.nc == nil || !c.nc.IsConnected() {
		return false, false
	}
	rctx, cancel := context.WithTimeout(ctx, aliveWait)
	_, err := c.nc.RequestWithContext(rctx, cl.Names().AliveSubject(id), nil)
	cancel()
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return true, true
	case ctx.Err() != nil || !c.nc.IsConnected():
		return false, false
	}
	return false, true
}

func queueOf(st *jobs.State) string {
	if st.Queue == "" {
		return jobs.DefaultQueue
	}
	return st.Queue
}
