package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/natstest"
)

// BenchmarkPipeline measures jobs per second through the whole pipeline:
// Client.Submit (state create + publish), a worker (claim, started event,
// runner, transcripts, state, terminal event, ack) and the final state.
// The runner itself does nothing, so this is the pipeline's own overhead.
func BenchmarkPipeline(b *testing.B) {
	for _, conc := range []int{1, 8} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			s := startServer(b)
			nc := natstest.Connect(b, s)
			echo := RunnerFunc(func(context.Context, *Job, RunEnv) (*Outcome, error) {
				return &Outcome{Result: agentloop.Result{Answer: "x", Messages: []llm.Message{{Role: llm.RoleAssistant, Content: "x"}}}}, nil
			})
			w, err := NewWorker(Config{Conn: nc, Runner: echo, Concurrency: conc, FetchWait: 100e6})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					b.Error(err)
				}
			}()
			<-w.Ready()
			c, err := NewClient(ctx, nc, ClientConfig{})
			if err != nil {
				b.Fatal(err)
			}
			watch, err := c.topo.State.WatchAll(ctx, jetstream.UpdatesOnly())
			if err != nil {
				b.Fatal(err)
			}
			defer watch.Stop() //nolint:errcheck
			b.ResetTimer()
			go func() {
				for i := range b.N {
					if _, err := c.Submit(ctx, &Job{ID: fmt.Sprintf("b%d", i), Task: "echo:x"}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
			for finished := 0; finished < b.N; {
				e := <-watch.Updates()
				if e == nil {
					continue
				}
				var st State
				if json.Unmarshal(e.Value(), &st) == nil && st.Status.Terminal() {
					finished++
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
