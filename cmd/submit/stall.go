package main

import (
	"context"
	"errors"
	"fmt"
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
// at all is told once too (until a worker comes). It returns a stop function that
// waits for its goroutine.
func (c *cli) watchOwner(cl *jobs.Client, id string) (stop func()) {
	ctx, cancel := context.WithCancel(c.ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		told := 0         // the attempt already reported
		toldIdle := false // no worker at all, reported
		tick := time.NewTicker(aliveEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if st, none, ok := c.noWorker(ctx, cl, id); ok {
				if none && !toldIdle {
					fmt.Fprintf(c.stderr, "submit: no worker is running (none answers on %s): job %s waits queued until a worker "+
						"of queue %s starts (submit goes on waiting; Ctrl-C stops following, not the job)\n",
						cl.Names().AliveWildcard(), id, queueOf(st))
				}
				toldIdle = none // told again after workers come and go
				continue
			}
			st, ok := c.silentOwner(ctx, cl, id)
			if !ok || st.Attempt == told {
				continue
			}
			told = st.Attempt
			fmt.Fprintf(c.stderr, "submit: worker %s running job %s (attempt %d) does not answer: it may have stopped. "+
				"The job is not lost: after the ack wait (JETAGENT_ACK_WAIT) a worker of queue %s runs it again; with none "+
				"running it waits for one (submit goes on waiting; Ctrl-C stops following, not the job)\n", st.Worker, id, st.Attempt, queueOf(st))
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// silentOwner is the job's state when it is running and the worker it
// names did not answer the liveness request, read again after the request
// so that a job that ended or moved on meanwhile is not reported.
func (c *cli) silentOwner(ctx context.Context, cl *jobs.Client, id string) (*jobs.State, bool) {
	st, err := cl.Status(ctx, id)
	if err != nil || st.Status != jobs.StatusRunning || c.nc == nil || !c.nc.IsConnected() {
		return nil, false
	}
	rctx, cancel := context.WithTimeout(ctx, aliveWait)
	_, err = c.nc.RequestWithContext(rctx, cl.Names().AliveSubject(id), nil)
	cancel()
	if err == nil || ctx.Err() != nil || !c.nc.IsConnected() ||
		(!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, nats.ErrTimeout)) {
		return nil, false
	}
	now, err := cl.Status(ctx, id)
	if err != nil || now.Status != jobs.StatusRunning || now.Attempt != st.Attempt || now.Worker != st.Worker {
		return nil, false
	}
	return now, true
}

// noWorker reports, for a queued job, whether no worker at all is
// running: every worker subscribes to the liveness requests, so one for
// the job is told at once that nothing listens (a queued job's own is
// not answered even by a live worker, which runs other jobs or none).
// A job that waits on a queue no live worker serves while others run is
// not told apart: the workers' queues are not known here. ok is false
// when the job is not queued or nothing could be told.
func (c *cli) noWorker(ctx context.Context, cl *jobs.Client, id string) (st *jobs.State, none, ok bool) {
	st, err := cl.Status(ctx, id)
	if err != nil || st.Status != jobs.StatusQueued || c.nc == nil || !c.nc.IsConnected() {
		return nil, false, false
	}
	rctx, cancel := context.WithTimeout(ctx, aliveWait)
	_, err = c.nc.RequestWithContext(rctx, cl.Names().AliveSubject(id), nil)
	cancel()
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return st, true, true
	case ctx.Err() != nil || !c.nc.IsConnected():
		return nil, false, false
	}
	return st, false, true
}

func queueOf(st *jobs.State) string {
	if st.Queue == "" {
		return jobs.DefaultQueue
	}
	return st.Queue
}
