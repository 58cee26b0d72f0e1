package jobs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/natstest"
)

// crashTopology is shared by the parent test and the child worker, so
// neither "updates" the other's consumer.
func crashTopology() TopologyConfig {
	return TopologyConfig{AckWait: time.Second, MaxDeliver: 3}
}

// runChildWorker is the worker process of TestWorkerCrashRedelivers: it
// runs a worker whose jobs never finish, until it is killed.
func runChildWorker() int {
	nc, err := nats.Connect(os.Getenv("NATS_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	hang := RunnerFunc(func(ctx context.Context, _ *Job, _ RunEnv) (*Outcome, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	w, err := NewWorker(Config{Conn: nc, Runner: hang, WorkerID: "child", Topology: crashTopology(), FetchWait: 200 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := w.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// TestWorkerCrashRedelivers kills a worker process (SIGKILL) in the middle
// of a job; the job comes back after its ack wait and a second worker
// finishes it.
func TestWorkerCrashRedelivers(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	ctx := natstest.Context(t)
	js, _ := jetstream.New(nc)
	if _, err := EnsureTopology(ctx, js, crashTopology(), nil); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, nc)

	var stderr strings.Builder
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"=worker", "NATS_URL="+s.ClientURL())
	child.Stderr = &stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = child.Process.Kill()
			_ = child.Wait()
		}
	})

	started, err := nc.SubscribeSync(c.names.EventSubject("crash-1", EventStarted))
	if err != nil {
		t.Fatal(err)
	}
	defer started.Unsubscribe() //nolint:errcheck
	if _, err := c.Submit(ctx, &Job{ID: "crash-1", Task: "echo:survived"}); err != nil {
		t.Fatal(err)
	}
	if _, err := started.NextMsgWithContext(ctx); err != nil {
		t.Fatalf("child did not start the job: %v", err)
	}
	st, err := c.Status(ctx, "crash-1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Worker != "child" || st.Attempt != 1 {
		t.Fatalf("state %+v", st)
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	killed = true
	if stderr.Len() > 0 {
		t.Logf("child stderr: %s", stderr.String())
	}

	r := newTestRunner()
	startWorker(t, nc, Config{Runner: r, WorkerID: "rescuer", Topology: crashTopology()})
	st = waitStatus(t, c, "crash-1")
	if st.Status != StatusSucceeded || st.Worker != "rescuer" || st.Attempt != 2 || st.Result.Answer != "survived" {
		t.Fatalf("state %+v", st)
	}
	var trail []string
	for _, ev := range watchEvents(t, c, "crash-1") {
		trail = append(trail, fmt.Sprintf("%s@%d/%s", ev.Type, ev.Attempt, ev.Worker))
	}
	want := "started@1/child,started@2/rescuer,note@2/rescuer,succeeded@2/rescuer"
	if got := strings.Join(trail, ","); got != want {
		t.Errorf("events %s\nwant   %s", got, want)
	}
}
