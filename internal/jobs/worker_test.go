package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/natstest"
	"github.com/jetagent/jetagent/schemas"
)

func TestJobSucceedsAndPayloadsMatchSchemas(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	r := newTestRunner()
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := startWorker(t, nc, Config{Runner: r, WorkerID: "w1", Metrics: metrics})
	c := newClient(t, nc)
	ctx := natstest.Context(t)

	rc, err := c.Submit(ctx, &Job{Task: "echo:hello", Metadata: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if rc.Duplicate || !ValidID(rc.ID) || rc.Queue != DefaultQueue {
		t.Fatalf("receipt %+v", rc)
	}
	var types []string
	st, err := c.Watch(ctx, rc.ID, func(ev Event) { types = append(types, ev.Type) })
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != StatusSucceeded || st.Result == nil || st.Result.Answer != "hello" || st.Worker != w.ID() || st.Attempt != 1 {
		t.Fatalf("state %+v result %+v", st, st.Result)
	}
	if got := strings.Join(types, ","); got != "started,note,succeeded" {
		t.Errorf("events %s", got)
	}
	if st.Result.Transcript != rc.ID || st.Result.Metadata["k"] != "v" || st.Result.Usage.PromptTokens != 10 {
		t.Errorf("result %+v", st.Result)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "," + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case m.Counter != nil:
				got[key] = m.Counter.GetValue()
			case m.Histogram != nil:
				got[key] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	for k, want := range map[string]float64{
		"jetagent_jobs_started_total,queue=default":                    1,
		"jetagent_jobs_finished_total,queue=default,status=succeeded":  1,
		"jetagent_job_duration_seconds,queue=default,status=succeeded": 1,
	} {
		if got[k] != want {
			t.Errorf("metric %s = %v, want %v (all: %v)", k, got[k], want, got)
		}
	}

	v, err := NewValidator(0)
	if err != nil {
		t.Fatal(err)
	}
	check := func(schema string, data []byte) {
		t.Helper()
		if err := v.Validate(schema, data); err != nil {
			t.Errorf("%s: %v\n%s", schema, err, data)
		}
	}
	for _, m := range streamMsgs(t, nc, c.names.EventsStream(), c.names.EventsFilter(rc.ID)) {
		check(schemas.Event, m.Data)
		var ev Event
		_ = json.Unmarshal(m.Data, &ev)
		if want := fmt.Sprintf("%s.%d.%d", ev.JobID, ev.Attempt, ev.Seq); m.Header.Get(nats.MsgIdHdr) != want {
			t.Errorf("event msg id %q, want %q", m.Header.Get(nats.MsgIdHdr), want)
		}
	}
	e, err := c.topo.State.Get(ctx, rc.ID)
	if err != nil {
		t.Fatal(err)
	}
	check(schemas.State, e.Value())
	check(schemas.Result, mustJSON(st.Result))
	check(schemas.Job, streamMsgsJob(t, c, rc))
	for _, raw := range []bool{false, true} {
		b, err := c.Transcript(ctx, rc.ID, raw)
		if err != nil {
			t.Fatal(err)
		}
		check(schemas.Transcript, b)
		var tr Transcript
		_ = json.Unmarshal(b, &tr)
		if tr.Reflected == raw || len(tr.Messages) != 2 || tr.Messages[1].Content != "hello" {
			t.Errorf("transcript raw=%v: %+v", raw, tr)
		}
	}
}

// streamMsgsJob returns the job as a worker received it: the jobs stream
// is a work queue, so the copy is gone; rebuild it the way Submit sent it.
func streamMsgsJob(t *testing.T, c *Client, rc *Receipt) []byte {
	t.Helper()
	return mustJSON(&Job{ID: rc.ID, Task: "echo:hello", Queue: rc.Queue, Metadata: map[string]string{"k": "v"}})
}

func TestDuplicateSubmissionQueuedOnce(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	r := newTestRunner()
	startWorker(t, nc, Config{Runner: r, Topology: TopologyConfig{AckWait: 2 * time.Second, Queues: []string{"other"}}})
	c := newClient(t, nc)
	ctx := natstest.Context(t)

	// No worker serves queue "q1" yet, so both copies would sit in the stream.
	job := &Job{ID: "dup-1", Task: "echo:once", Queue: "q1"}
	first, err := c.Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if first.Duplicate || !second.Duplicate || first.Seq != second.Seq {
		t.Fatalf("first %+v second %+v", first, second)
	}
	// A plain publish with the same Nats-Msg-Id is dropped by the stream too.
	js, _ := jetstream.New(nc)
	ack, err := js.Publish(ctx, c.names.JobsSubject("q1"), mustJSON(job), jetstream.WithMsgID("dup-1"))
	if err != nil || !ack.Duplicate {
		t.Fatalf("plain duplicate publish: %+v %v", ack, err)
	}
	if n := len(streamMsgs(t, nc, c.names.JobsStream(), c.names.JobsSubject("q1"))); n != 1 {
		t.Fatalf("%d messages queued, want 1", n)
	}

	startWorker(t, nc, Config{Runner: r, Topology: TopologyConfig{AckWait: 2 * time.Second, Queues: []string{"q1"}}})
	st := waitStatus(t, c, "dup-1")
	if st.Status != StatusSucceeded || r.runCount("dup-1") != 1 {
		t.Fatalf("state %+v, runs %d", st, r.runCount("dup-1"))
	}
	// Once final, resubmitting publishes nothing and reports the result.
	third, err := c.Submit(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if !third.Duplicate || third.Seq != 0 || third.State.Status != StatusSucceeded {
		t.Fatalf("third %+v", third)
	}
}

func TestBadJobsAreDeadLettered(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	r := newTestRunner()
	startWorker(t, nc, Config{
		Runner: r, MaxJobBytes: 4096,
		KnownServer: func(name string) bool { return name == "files" },
	})
	c, err := NewClient(natstest.Context(t), nc, ClientConfig{MaxJobBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	ctx := natstest.Context(t)
	js, _ := jetstream.New(nc)

	tests := []struct {
		name    string
		id      string
		payload string
		reason  string
	}{
		{"malformed JSON", "bad-json", `{"task": "x"`, "job is not JSON: "},
		{"not an object", "bad-array", `["task"]`, "job fails schemas/job.schema.json: at '': got array, want object"},
		{"schema violation", "bad-schema", `{"id":"bad-schema","task":"","tool_mode":"fast"}`,
			"job fails schemas/job.schema.json: "},
		{"too large", "bad-large", `{"id":"bad-large","task":"` + strings.Repeat("x", 5000) + `"}`,
			"job too large: 5028 bytes, limit 4096"},
		{"unknown server", "bad-server", `{"id":"bad-server","task":"echo:x","servers":["files","shell"]}`,
			`job names an MCP server this worker does not configure: "shell"`},
	}
	for _, tt := range tests {
		m := nats.NewMsg(c.names.JobsSubject(DefaultQueue))
		m.Data = []byte(tt.payload)
		m.Header.Set(nats.MsgIdHdr, tt.id)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := waitStatus(t, c, tt.id)
			if st.Status != StatusDead || !strings.HasPrefix(st.Error, tt.reason) || st.Result.Error != st.Error {
				t.Fatalf("state %+v, want dead with %q", st, tt.reason)
			}
			var dl *jetstream.RawStreamMsg
			for _, m := range streamMsgs(t, nc, c.names.DLQStream(), c.names.DLQSubject(DefaultQueue)) {
				if m.Header.Get("Jetagent-Job-Id") == tt.id {
					dl = m
				}
			}
			if dl == nil {
				t.Fatal("no dead letter")
			}
			if dl.Header.Get("Jetagent-Reason") != st.Error || string(dl.Data) != tt.payload ||
				dl.Header.Get("Jetagent-Original-Msg-Id") != tt.id {
				t.Errorf("dead letter %v %q", dl.Header, dl.Data)
			}
			// The submit CLI refuses the same payload with the same words.
			if tt.name != "unknown server" {
				if _, err := c.SubmitRaw(ctx, []byte(tt.payload)); err == nil || !errors.Is(err, ErrRejected) {
					t.Errorf("SubmitRaw accepted it: %v", err)
				} else if err.Error() != st.Error {
					t.Errorf("client says %q, worker said %q", err, st.Error)
				}
			}
		})
	}
	if n := len(streamMsgs(t, nc, c.names.JobsStream(), "")); n != 0 {
		t.Errorf("%d rejected jobs still queued", n)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.runs) != 0 {
		t.Errorf("rejected jobs ran: %v", r.runs)
	}
}

func TestMaxDeliverDeadLetters(t *testing.T) {
	t.Parallel()

	t.Run("deliveries without ack", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		nc := natstest.Connect(t, s)
		ctx := natstest.Context(t)
		js, _ := jetstream.New(nc)
		topoCfg := TopologyConfig{AckWait: time.Second, MaxDeliver: 2}
		topo, err := EnsureTopology(ctx, js, topoCfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := newClient(t, nc)
		if _, err := c.Submit(ctx, &Job{ID: "poison", Task: "echo:x"}); err != nil {
			t.Fatal(err)
		}
		// Two deliveries that are never acknowledged: a worker that
		// crashes on this job, twice.
		cons := topo.Consumers[DefaultQueue]
		for i := 1; i <= 2; i++ {
			m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
			if err != nil {
				t.Fatalf("delivery %d: %v", i, err)
			}
			if md, _ := m.Metadata(); md.NumDelivered != uint64(i) {
				t.Fatalf("delivery %d has count %d", i, md.NumDelivered)
			}
		}
		r := newTestRunner()
		startWorker(t, nc, Config{Runner: r, Topology: topoCfg})
		st := waitStatus(t, c, "poison")
		if st.Status != StatusDead || !strings.HasPrefix(st.Error, "max deliveries exhausted: delivered 2 times") {
			t.Fatalf("state %+v", st)
		}
		dls := streamMsgs(t, nc, c.names.DLQStream(), "")
		if len(dls) != 1 || dls[0].Header.Get("Jetagent-Reason") != st.Error {
			t.Fatalf("dead letters %v", dls)
		}
		waitEmpty(t, nc, c) // deleted once its dead letter is recorded
		if r.runCount("poison") != 0 {
			t.Error("the worker ran the poison job")
		}
	})

	t.Run("retryable errors", func(t *testing.T) {
		t.Parallel()
		s := startServer(t)
		nc := natstest.Connect(t, s)
		r := newTestRunner()
		startWorker(t, nc, Config{Runner: r, Topology: TopologyConfig{AckWait: 2 * time.Second, MaxDeliver: 3}})
		c := newClient(t, nc)
		if _, err := c.Submit(natstest.Context(t), &Job{ID: "flaky", Task: "retry:upstream 503"}); err != nil {
			t.Fatal(err)
		}
		st := waitStatus(t, c, "flaky")
		if st.Status != StatusDead || st.Error != "max deliveries (3) exhausted: upstream 503" || st.Attempt != 3 {
			t.Fatalf("state %+v", st)
		}
		if r.runCount("flaky") != 3 {
			t.Errorf("ran %d times, want 3", r.runCount("flaky"))
		}
		var kinds []string
		for _, ev := range watchEvents(t, c, "flaky") {
			kinds = append(kinds, ev.Type)
		}
		if got := strings.Join(kinds, ","); got != "started,retry,started,retry,started,dead" {
			t.Errorf("events %s", got)
		}
		if len(streamMsgs(t, nc, c.names.DLQStream(), "")) != 1 {
			t.Error("no dead letter")
		}
	})
}

func TestFailureAndTimeout(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	nc := natstest.Connect(t, s)
	r := newTestRunner()
	startWorker(t, nc, Config{Runner: r})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	for _, j := range []*Job{{ID: "fails", Task: "fail:tool exploded"}, {ID: "slow", Task: "block", Timeout: "200ms"}} {
		if _, err := c.Submit(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	if st := waitStatus(t, c, "fails"); st.Status != StatusFailed || st.Error != "tool exploded" {
		t.Errorf("fails: %+v", st)
	}
	if st := waitStatus(t, c, "slow"); st.Status != StatusFailed || st.Error != "job timed out after 200ms" {
		t.Errorf("slow: %+v", st)
	}
	if r.runCount("fails") != 1 || r.runCount("slow") != 1 {
		t.Error("failed jobs were retried")
	}
}

// An attempt that loses its job (another attempt took the state over)
// still ends in the metrics: jetagent_jobs_running goes back to 0 and the
// attempt is counted as lost, whichever way it would have ended.
func TestMetricsBalancedWhenTheJobIsLost(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, startServer(t))
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	taken := make(chan string, 4)
	runner := RunnerFunc(func(ctx context.Context, job *Job, env RunEnv) (*Outcome, error) {
		// Someone else owns the job now: its state names another worker.
		js, err := jetstream.New(env.Conn())
		if err != nil {
			return nil, err
		}
		kv, err := js.KeyValue(ctx, env.Names().StateBucket())
		if err != nil {
			return nil, err
		}
		st := State{ID: job.ID, Status: StatusRunning, Attempt: 9, Worker: "someone-else", UpdatedAt: time.Now()}
		if _, err := kv.Put(ctx, job.ID, mustJSON(st)); err != nil {
			return nil, err
		}
		taken <- job.ID
		switch job.Task {
		case "retry":
			return nil, Retryable(errors.New("transient"))
		case "fail":
			return nil, errors.New("failed")
		}
		return &Outcome{Result: agentloop.Result{Answer: "ok"}}, nil
	})
	startWorker(t, nc, Config{Runner: runner, Metrics: metrics, Concurrency: 1})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	for _, task := range []string{"retry", "fail", "ok"} {
		if _, err := c.Submit(ctx, &Job{Task: task}); err != nil {
			t.Fatal(err)
		}
		<-taken
	}
	// The three attempts end after their runner returns; wait until the
	// histogram has all three, then the gauge must be back at 0. The gauge
	// is read by a later Gather: one Gather is no snapshot (it collects its
	// collectors concurrently, in no set order), so it could read the gauge
	// before the last attempt's decrement and the histogram after its
	// observation (attemptEnded does them in that order), and report that
	// attempt both lost and running.
	for ctx.Err() == nil {
		if _, lost := gaugeAndLost(t, reg); lost >= 3 {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond): // polling a registry: there is no signal to wait on
		}
	}
	running, lost := gaugeAndLost(t, reg) // lost again: a fourth attempt that ended meanwhile shows
	if lost != 3 || running != 0 {
		t.Errorf("lost attempts %v (want 3), jobs running %v (want 0)", lost, running)
	}
}

func gaugeAndLost(t *testing.T, reg *prometheus.Registry) (running, lost float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "jetagent_jobs_running":
				running = m.GetGauge().GetValue()
			case "jetagent_job_duration_seconds":
				for _, l := range m.GetLabel() {
					if l.GetName() == "status" && l.GetValue() == "lost" {
						lost += float64(m.GetHistogram().GetSampleCount())
					}
				}
			}
		}
	}
	return running, lost
}

// A runner that does not reflect leaves Outcome.Reflected nil: the stored
// transcript then holds the raw messages and says it is not reflected.
func TestTranscriptOfARunnerThatDoesNotReflect(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, startServer(t))
	runner := RunnerFunc(func(_ context.Context, job *Job, _ RunEnv) (*Outcome, error) {
		return &Outcome{Result: agentloop.Result{Answer: "ok", Messages: []llm.Message{
			{Role: llm.RoleUser, Content: job.Task}, {Role: llm.RoleAssistant, Content: "ok"},
		}}}, nil
	})
	startWorker(t, nc, Config{Runner: runner})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	rc, err := c.Submit(ctx, &Job{Task: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, rc.ID); err != nil {
		t.Fatal(err)
	}
	for _, raw := range []bool{false, true} {
		b, err := c.Transcript(ctx, rc.ID, raw)
		if err != nil {
			t.Fatal(err)
		}
		var tr Transcript
		if err := json.Unmarshal(b, &tr); err != nil {
			t.Fatal(err)
		}
		if tr.Reflected || len(tr.Messages) != 2 {
			t.Errorf("transcript raw=%v: reflected=%v, %d messages", raw, tr.Reflected, len(tr.Messages))
		}
	}
}

// Every log line about a job carries its id and attempt.
func TestJobLogLinesCarryIDAndAttempt(t *testing.T) {
	t.Parallel()
	nc := natstest.Connect(t, startServer(t))
	var buf lockedLog
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	startWorker(t, nc, Config{Runner: newTestRunner(), Logger: log})
	c := newClient(t, nc)
	ctx := natstest.Context(t)
	for _, task := range []string{"echo:x", "fail:boom"} {
		rc, err := c.Submit(ctx, &Job{Task: task})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Watch(ctx, rc.ID, func(Event) {}); err != nil {
			t.Fatal(err)
		}
	}
	lines := 0
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if _, ok := rec["job"]; !ok {
			continue
		}
		lines++
		if _, ok := rec["attempt"]; !ok {
			t.Errorf("log line without attempt: %s", line)
		}
	}
	if lines < 3 { // two starts and a finish at least: the last finish may follow the event
		t.Errorf("%d log lines about jobs:\n%s", lines, buf.String())
	}
}

// lockedLog is a log sink a test reads while the worker writes.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
