package agentrun_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/agentrun"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/jobs/jobstest"
	"github.com/jetagent/jetagent/internal/journal"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/llm/llmtest"
	"github.com/jetagent/jetagent/internal/natstest"
	"github.com/jetagent/jetagent/internal/toolcache"
)

// journalFaultEnv is a job's RunEnv whose journal refuses every entry with
// err on the first attempt, as the worker's journal does while NATS is
// away: its bounded put gives up with the bound's deadline, or the
// connection's own error.
type journalFaultEnv struct {
	jobs.RunEnv
	err error
}

func (e journalFaultEnv) Journal() journal.Store {
	if e.Attempt() == 1 {
		return failingStore{e.err}
	}
	return e.RunEnv.Journal()
}

type failingStore struct{ err error }

func (s failingStore) Put(_ context.Context, key string, _ []byte) error {
	return fmt.Errorf("store %s: %w", key, s.err)
}

// A journal entry that cannot be stored (NATS away past the journal's
// bound) hands the job back, and the next attempt finishes it; nothing ran
// on the attempt that could not journal. The bound's error wraps
// context.DeadlineExceeded, which classify took for the job's own end, so
// the job failed for good with "context deadline exceeded" after a NATS
// restart that outlasted the bound.
func TestJournalOutageHandsTheJobBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"bound ran out", context.DeadlineExceeded},
		{"connection closed", nats.ErrConnectionClosed},
		{"no responders", nats.ErrNoResponders},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var writes atomic.Int32
			s := server.NewMCPServer("fx", "1.0.0", server.WithToolCapabilities(false))
			s.AddTool(mcp.NewTool("write", mcp.WithDescription("Write (a side effect).")),
				func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					writes.Add(1)
					return mcp.NewToolResultText("written"), nil
				})
			ctx, cancel := context.WithTimeout(t.Context(), natstest.WaitTimeout)
			defer cancel()
			pool, err := toolcache.NewPool(ctx, toolcache.Config{}, toolcache.WithInProcessServer("fx", s, toolcache.ServerConfig{}),
				toolcache.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = pool.Close() })
			write := llmtest.Reply{ToolCalls: []llm.ToolCall{{Function: llm.FunctionCall{Name: "write", Arguments: `{}`}}}}
			model := llmtest.NewServer(t, write, write, llmtest.Reply{Content: "done"})
			c, err := llm.New(llm.Config{BaseURL: model.URL(), Model: "scripted", MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			loop, err := agentloop.New(agentloop.Config{LLM: c})
			if err != nil {
				t.Fatal(err)
			}
			runner, err := agentrun.New(agentrun.Config{Loop: loop, Pool: pool})
			if err != nil {
				t.Fatal(err)
			}
			nc := natstest.Connect(t, natstest.Start(t))
			jobstest.RunWorker(t, jobs.Config{
				Conn: nc, Admit: agentrun.Admit,
				Runner: jobs.RunnerFunc(func(ctx context.Context, job *jobs.Job, env jobs.RunEnv) (*jobs.Outcome, error) {
					return runner.Run(ctx, job, journalFaultEnv{env, tc.err})
				}),
				FetchWait: 200 * time.Millisecond, RetryDelay: 10 * time.Millisecond, RetryDelayMax: 10 * time.Millisecond,
			})
			client, err := jobs.NewClient(natstest.Context(t), nc, jobs.ClientConfig{})
			if err != nil {
				t.Fatal(err)
			}
			rc, err := client.Submit(natstest.Context(t), &jobs.Job{ID: "jf", Task: "write", ToolMode: "full"})
			if err != nil {
				t.Fatal(err)
			}
			var types []string
			st, err := client.Watch(natstest.Context(t), rc.ID, func(ev jobs.Event) { types = append(types, ev.Type) })
			if err != nil {
				t.Fatal(err)
			}
			if st.Status != jobs.StatusSucceeded || st.Attempt != 2 || st.Result.Answer != "done" {
				t.Errorf("state %s attempt %d (%s), want succeeded on attempt 2; events %v", st.Status, st.Attempt, st.Error, types)
			}
			if n := count(types, jobs.EventRetry); n != 1 {
				t.Errorf("%d retry events, want 1: %v", n, types)
			}
			if n := writes.Load(); n != 1 {
				t.Errorf("write ran %d times, want once (on the attempt that could journal)", n)
			}
		})
	}
}
