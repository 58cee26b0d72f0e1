package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/jetagent/jetagent/internal/agentloop"
	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/jobs/jobstest"
	"github.com/jetagent/jetagent/internal/llm"
	"github.com/jetagent/jetagent/internal/natstest"
	"github.com/jetagent/jetagent/schemas"
)

func TestMain(m *testing.M) {
	if os.Getenv(localMCPEnv) != "" { // the test binary as a --local-mcp server
		serveLocalMCPForTests()
		return
	}
	if v, ok := os.LookupEnv(childArgsEnv); ok { // the test binary as submit (a process to kill)
		var args []string
		if err := json.Unmarshal([]byte(v), &args); err != nil {
			panic(err)
		}
		os.Exit(run(context.Background(), args, os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m, natstest.GoleakOptions()...)
}

// echoRunner answers "echo:X" with X, fails "fail:X", blocks on "block",
// answers "servers:" with the job's servers ("all" when it names none).
type echoRunner struct {
	mu   sync.Mutex
	runs map[string]int
}

func (r *echoRunner) Run(ctx context.Context, job *jobs.Job, env jobs.RunEnv) (*jobs.Outcome, error) {
	r.mu.Lock()
	r.runs[job.ID]++
	r.mu.Unlock()
	verb, arg, _ := strings.Cut(job.Task, ":")
	if verb == "servers" { // "servers:" answers the servers the job asks for
		switch {
		case job.Servers == nil:
			arg = "all"
		case len(job.Servers) == 0:
			arg = "none"
		default:
			arg = strings.Join(job.Servers, ",")
		}
	}
	if verb == "mode" { // "mode:" answers the job's tool_mode
		arg = job.ToolMode
	}
	switch verb {
	case "fail":
		return nil, errors.New(arg)
	case "big": // more than a 32 KiB max_payload carries
		_ = env.Emit(ctx, "tool.result", 1, map[string]any{"name": "cat", "output": bigOutput, "duration_ms": 1})
		return &jobs.Outcome{Result: agentloop.Result{Answer: bigAnswer, Rounds: 1, StopReason: "final_answer"}}, nil
	case "bigfail":
		return nil, errors.New(bigError)
	case "block":
		_ = env.Emit(ctx, "blocking", 0, nil)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	_ = env.Emit(ctx, "tool.call", 1, map[string]string{"name": "echo", "arguments": `{"text":"` + arg + `"}`})
	msgs := []llm.Message{{Role: llm.RoleUser, Content: job.Task}, {Role: llm.RoleAssistant, Content: arg}}
	return &jobs.Outcome{Result: agentloop.Result{Answer: arg, Rounds: 1, Mode: "full", StopReason: "final_answer", Messages: msgs},
		Reflected: msgs}, nil
}

// What echoRunner's "big" and "bigfail" produce.
var (
	bigOutput = strings.Repeat("sortie ", 10<<10)
	bigAnswer = strings.Repeat("réponse ", 10<<10) + "fin"
	bigError  = strings.Repeat("échec ", 10<<10) + "fin"
)

func (r *echoRunner) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[id]
}

type result struct {
	code           int
	stdout, stderr string
}

// submitCmd runs the command with stdin.
func submitCmd(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	// A bound against a hang, not a speed target: a 10,000-line batch
	// under -race on a busy machine took more than 30 s.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, args, strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// startWorker runs a worker (echoRunner, 4 slots, jobs up to 4096 bytes)
// on an embedded NATS server until the test ends, and points the
// command's environment at it, as a user's NATS_URL would.
func startWorker(t *testing.T) (*nats.Conn, *echoRunner) {
	t.Helper()
	return startWorkerMax(t, 0)
}

// startWorkerMax is startWorker on a server with the given max_payload
// (0: the default).
func startWorkerMax(t *testing.T, maxPayload int32) (*nats.Conn, *echoRunner) {
	t.Helper()
	s, err := jobs.StartEmbedded(jobs.EmbeddedConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0", MaxPayload: maxPayload})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	r := &echoRunner{runs: map[string]int{}}
	jobstest.RunWorker(t, jobs.Config{Conn: nc, Runner: r, WorkerID: "cli-test", Concurrency: 4, MaxJobBytes: 4096,
		FetchWait: 200 * time.Millisecond, ShutdownGrace: time.Second})
	t.Setenv("NATS_URL", s.ClientURL())
	t.Setenv("JETAGENT_MAX_JOB_BYTES", "4096")
	return nc, r
}

// TestSubmitCLI drives the command against a real worker on an embedded
// NATS server (NATS_URL points at it, as a user's would).
func TestSubmitCLI(t *testing.T) {
	nc, r := startWorker(t)

	t.Run("follow prints events and the answer", func(t *testing.T) {
		res := submitCmd(t, "", "echo:hello world")
		if res.code != 0 || res.stdout != "hello world\n" {
			t.Fatalf("%+v", res)
		}
		for _, want := range []string{"started", "attempt 1 on worker cli-test", "tool.call", "echo({\"text\":\"hello world\"})", "succeeded"} {
			if !strings.Contains(res.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, res.stderr)
			}
		}
	})

	t.Run("task on stdin, flags after the task", func(t *testing.T) {
		res := submitCmd(t, "echo:from stdin\n", "--meta", "team=a")
		if res.code != 0 || res.stdout != "from stdin\n" {
			t.Fatalf("%+v", res)
		}
	})

	t.Run("a task that begins with a command's name", func(t *testing.T) {
		for _, tc := range []struct {
			args     []string
			id, task string
		}{
			{[]string{"--id", "word-1", "status"}, "word-1", "status"},
			{[]string{"--detach", "--id", "word-2", "--", "watch", "--json"}, "word-2", "watch --json"},
			{[]string{"cancel the build", "--id", "word-3"}, "word-3", "cancel the build"},
		} {
			if res := submitCmd(t, "", tc.args...); res.code != 0 {
				t.Fatalf("%v: %+v", tc.args, res)
			}
			var st jobs.State
			res := submitCmd(t, "", "status", "--json", tc.id)
			if err := json.Unmarshal([]byte(res.stdout), &st); err != nil || st.Task != tc.task {
				t.Errorf("%v: want task %q, got %+v", tc.args, tc.task, res)
			}
		}
	})

	t.Run("failure exits non-zero", func(t *testing.T) {
		res := submitCmd(t, "", "fail:boom", "--id", "failing")
		if res.code != 1 || !strings.Contains(res.stderr, "job failing failed: boom") {
			t.Fatalf("%+v", res)
		}
	})

	t.Run("mode in another case", func(t *testing.T) {
		// As JETAGENT_TOOL_MODE=FULL is taken; the schema refused it.
		res := submitCmd(t, "", "--mode", "FULL", "--id", "mode-upper", "mode:")
		if res.code != 0 || strings.TrimSpace(res.stdout) != "full" {
			t.Fatalf("%+v", res)
		}
	})

	t.Run("invalid job refused before publishing with the worker's words", func(t *testing.T) {
		res := submitCmd(t, "", "--mode", "fast", "--id", "refused", "echo:x")
		want := "job fails schemas/job.schema.json: at '/tool_mode': value must be one of 'auto', 'full', 'deferred', 'search', 'code'"
		if res.code != 1 || !strings.Contains(res.stderr, want) {
			t.Fatalf("%+v", res)
		}
		if st := submitCmd(t, "", "status", "refused"); st.code != 1 || !strings.Contains(st.stderr, "job not found") {
			t.Errorf("refused job was published: %+v", st)
		}
		big := submitCmd(t, "", "echo:"+strings.Repeat("x", 5000))
		if big.code != 1 || !strings.Contains(big.stderr, "job too large") {
			t.Errorf("large job: %+v", big)
		}
	})

	t.Run("same id twice runs once", func(t *testing.T) {
		first := submitCmd(t, "", "--id", "dup", "echo:once")
		second := submitCmd(t, "", "--id", "dup", "echo:once")
		if first.code != 0 || second.code != 0 || second.stdout != "once\n" || !strings.Contains(second.stderr, "already ended (succeeded); not queued again") {
			t.Fatalf("first %+v\nsecond %+v", first, second)
		}
		if r.count("dup") != 1 {
			t.Errorf("ran %d times", r.count("dup"))
		}
	})

	t.Run("detach, watch, status, transcript", func(t *testing.T) {
		res := submitCmd(t, "", "--detach", "--json", "echo:later")
		var rc jobs.Receipt
		if err := json.Unmarshal([]byte(res.stdout), &rc); err != nil || res.code != 0 || rc.ID == "" {
			t.Fatalf("%+v %v", res, err)
		}
		watch := submitCmd(t, "", "watch", rc.ID)
		if watch.code != 0 || watch.stdout != "later\n" {
			t.Fatalf("watch %+v", watch)
		}
		st := submitCmd(t, "", "status", rc.ID)
		if st.code != 0 || !strings.Contains(st.stdout, "succeeded") || !strings.Contains(st.stdout, "later") {
			t.Errorf("status %+v", st)
		}
		st = submitCmd(t, "", "status", "--json", rc.ID)
		v, _ := jobs.NewValidator(0)
		if err := v.Validate(schemas.State, []byte(st.stdout)); err != nil {
			t.Errorf("status --json: %v", err)
		}
		tr := submitCmd(t, "", "transcript", rc.ID)
		if tr.code != 0 || !strings.Contains(tr.stdout, "assistant: later") || !strings.Contains(tr.stdout, "reflected transcript") {
			t.Errorf("transcript %+v", tr)
		}
		raw := submitCmd(t, "", "transcript", rc.ID, "--raw", "--json")
		if err := v.Validate(schemas.Transcript, []byte(raw.stdout)); err != nil || !strings.Contains(raw.stdout, `"reflected":false`) {
			t.Errorf("transcript --raw --json: %v %s", err, raw.stdout)
		}
	})

	t.Run("json follow", func(t *testing.T) {
		res := submitCmd(t, "", "--json", "echo:j")
		lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
		var last struct{ Result jobs.Result }
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Result.Answer != "j" || res.code != 0 {
			t.Fatalf("%+v", res)
		}
		var first struct{ Event jobs.Event }
		if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first.Event.Type != "started" {
			t.Errorf("first line %s", lines[0])
		}
	})

	t.Run("cancel", func(t *testing.T) {
		sub, err := nc.SubscribeSync("agent.events.stuck.blocking")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe() //nolint:errcheck
		if res := submitCmd(t, "", "--detach", "--id", "stuck", "block"); res.code != 0 {
			t.Fatalf("%+v", res)
		}
		if _, err := sub.NextMsg(20 * time.Second); err != nil {
			t.Fatal(err)
		}
		res := submitCmd(t, "", "cancel", "stuck")
		if res.code != 0 || res.stdout != "job stuck cancelled\n" {
			t.Fatalf("%+v", res)
		}
		// Cancelling is idempotent; a job that ended otherwise is reported.
		if again := submitCmd(t, "", "cancel", "stuck"); again.code != 0 {
			t.Errorf("second cancel %+v", again)
		}
		if done := submitCmd(t, "", "cancel", "dup"); done.code != 1 || !strings.Contains(done.stderr, "had already ended: succeeded") {
			t.Errorf("cancel of a finished job %+v", done)
		}
	})

	t.Run("batch", func(t *testing.T) {
		dir := t.TempDir()
		in := filepath.Join(dir, "tasks.jsonl")
		out := filepath.Join(dir, "results.jsonl")
		lines := []string{
			`"echo:one"`,
			`{"id":"b-two","task":"echo:two","metadata":{"row":"2"}}`,
			``,
			`"fail:three"`,
			`{"task":""}`,
			`not json`,
			`"echo:six"`,
		}
		if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		res := submitCmd(t, "", "--file", in, "--out", out, "--parallel", "2", "--meta", "batch=1")
		if res.code != 1 {
			t.Fatalf("exit %d\n%s", res.code, res.stderr)
		}
		if !strings.Contains(res.stderr, "[6/6]") || !strings.Contains(res.stderr, "6 jobs: 3 succeeded, 3 did not") {
			t.Errorf("progress:\n%s", res.stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := jobs.NewValidator(0)
		byStatus := map[jobs.Status]int{}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if err := v.Validate(schemas.Result, []byte(l)); err != nil {
				t.Errorf("result line %s: %v", l, err)
			}
			var r jobs.Result
			_ = json.Unmarshal([]byte(l), &r)
			byStatus[r.Status]++
			if r.ID == "b-two" && (r.Metadata["row"] != "2" || r.Metadata["batch"] != "1") {
				t.Errorf("metadata %v", r.Metadata)
			}
		}
		if byStatus[jobs.StatusSucceeded] != 3 || byStatus[jobs.StatusFailed] != 3 {
			t.Errorf("results %v", byStatus)
		}
	})

	t.Run("usage", func(t *testing.T) {
		if res := submitCmd(t, ""); res.code != 2 || !strings.Contains(res.stderr, "no task") {
			t.Errorf("%+v", res)
		}
		if res := submitCmd(t, "", "--help"); res.code != 0 || !strings.Contains(res.stdout, "NATS_URL") {
			t.Errorf("%+v", res)
		}
		if res := submitCmd(t, "", "status"); res.code != 2 {
			t.Errorf("%+v", res)
		}
	})
}

// TestSubmitCLIOversized: on a server with a small max_payload, an event
// published reduced is marked in the human output and printed whole with
// --json; an answer or error too large for the job's state is printed whole
// by follow, status and their --json forms.
func TestSubmitCLIOversized(t *testing.T) {
	startWorkerMax(t, 32<<10)
	v, _ := jobs.NewValidator(0)

	t.Run("follow", func(t *testing.T) {
		res := submitCmd(t, "", "--id", "big-1", "big")
		if res.code != 0 || res.stdout != bigAnswer+"\n" {
			t.Fatalf("exit %d, stdout %d bytes, stderr:\n%.2000s", res.code, len(res.stdout), res.stderr)
		}
		var line string
		for _, l := range strings.Split(res.stderr, "\n") {
			if strings.Contains(l, "tool.result") {
				line = l
			}
		}
		outJSON, _ := json.Marshal(map[string]any{"duration_ms": 1, "name": "cat", "output": bigOutput})
		want := fmt.Sprintf("… (truncated; %d bytes in AGENT_TRANSCRIPTS/big-1.event.1.2)", len(outJSON))
		if !strings.HasSuffix(line, want) || !strings.Contains(line, "cat → sortie sortie") || len(line) > 400 {
			t.Errorf("tool.result line %q, want it to end %q", line, want)
		}
	})

	t.Run("follow --json", func(t *testing.T) {
		res := submitCmd(t, "", "--json", "--id", "big-2", "big")
		if res.code != 0 {
			t.Fatalf("%d %s", res.code, res.stderr)
		}
		var sawOutput, sawAnswer bool
		for _, l := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
			var line struct {
				Event  *jobs.Event
				Result json.RawMessage
			}
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
			switch {
			case line.Event != nil && line.Event.Type == "tool.result":
				var d map[string]any
				_ = json.Unmarshal(line.Event.Data, &d)
				sawOutput = d["output"] == bigOutput && d["truncated"] == nil
			case line.Event != nil && line.Event.Type == "succeeded":
				var r jobs.Result
				_ = json.Unmarshal(line.Event.Data, &r)
				sawAnswer = r.Answer == bigAnswer && r.AnswerRef == nil
			case line.Result != nil:
				if err := v.Validate(schemas.Result, line.Result); err != nil {
					t.Errorf("result: %v", err)
				}
				var r jobs.Result
				_ = json.Unmarshal(line.Result, &r)
				if r.Answer != bigAnswer {
					t.Errorf("result answer of %d bytes", len(r.Answer))
				}
			}
		}
		if !sawOutput || !sawAnswer {
			t.Errorf("full tool output %v, full answer in the terminal event %v", sawOutput, sawAnswer)
		}
	})

	t.Run("status", func(t *testing.T) {
		st := submitCmd(t, "", "status", "big-1")
		if st.code != 0 || !strings.Contains(st.stdout, "réponse réponse") {
			t.Errorf("status %+v", st)
		}
		st = submitCmd(t, "", "status", "--json", "big-1")
		if err := v.Validate(schemas.State, []byte(st.stdout)); err != nil {
			t.Errorf("status --json: %v", err)
		}
		var s jobs.State
		if err := json.Unmarshal([]byte(st.stdout), &s); err != nil || s.Result == nil || s.Result.Answer != bigAnswer {
			t.Errorf("status --json: %v", err)
		}
	})

	t.Run("error", func(t *testing.T) {
		res := submitCmd(t, "", "--id", "big-3", "bigfail")
		if res.code != 1 || !strings.Contains(res.stderr, "job big-3 failed: "+bigError+"\n") {
			t.Fatalf("exit %d, stderr %d bytes", res.code, len(res.stderr))
		}
		want := fmt.Sprintf("… (truncated; %d bytes in AGENT_TRANSCRIPTS/big-3.error)", len(bigError))
		if !strings.Contains(res.stderr, want) {
			t.Errorf("failed line lacks %q", want)
		}
		st := submitCmd(t, "", "status", "--json", "big-3")
		var s jobs.State
		if err := json.Unmarshal([]byte(st.stdout), &s); err != nil || s.Error != bigError || s.Result.Error != bigError {
			t.Errorf("status --json: %v", err)
		}
	})
}

// stateBucket is the job states' bucket on nc's server, to put states a
// test needs (a worker gone, say).
func stateBucket(t *testing.T, nc *nats.Conn) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(natstest.Context(t), "AGENT_STATE")
	if err != nil {
		t.Fatal(err)
	}
	return kv
}
