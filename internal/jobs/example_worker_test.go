package jobs_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/jobs"
)

// A worker and a client on an embedded NATS: the runner upper-cases the
// task; the client submits a job, waits for it and reads its result.
func ExampleWorker() {
	dir, _ := os.MkdirTemp("", "jetagent-example-")
	defer os.RemoveAll(dir)
	ns, err := jobs.StartEmbedded(jobs.EmbeddedConfig{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		panic(err)
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		panic(err)
	}
	defer nc.Close()

	shout := jobs.RunnerFunc(func(ctx context.Context, job *jobs.Job, env jobs.RunEnv) (*jobs.Outcome, error) {
		_ = env.Emit(ctx, "note", 1, map[string]string{"text": "shouting"})
		return &jobs.Outcome{Result: agentloop.Result{Answer: strings.ToUpper(job.Task), Rounds: 1}}, nil
	})
	w, err := jobs.NewWorker(jobs.Config{Conn: nc, Runner: shout, WorkerID: "example"})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			panic(err)
		}
	}()
	<-w.Ready()

	client, err := jobs.NewClient(ctx, nc, jobs.ClientConfig{})
	if err != nil {
		panic(err)
	}
	receipt, err := client.Submit(ctx, &jobs.Job{ID: "hello-1", Task: "hello, world"})
	if err != nil {
		panic(err)
	}
	st, err := client.Wait(ctx, receipt.ID)
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Status, st.Attempt, st.Worker)
	fmt.Println(st.Result.Answer)
	// Output:
	// succeeded 1 example
	// HELLO, WORLD
}
