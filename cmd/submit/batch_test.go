package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/schemas"
)

// outLine is one line of --out: a result and the batch line it came from.
type outLine struct {
	Line int `json:"line"`
	jobs.Result
}

// readOut parses an --out file, checking each line against the result schema.
func readOut(t *testing.T, path string) map[int]outLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jobs.NewValidator(0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]outLine{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if err := v.Validate(schemas.Result, []byte(l)); err != nil {
			t.Errorf("result line %s: %v", l, err)
		}
		var o outLine
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if _, dup := out[o.Line]; dup || o.Line == 0 {
			t.Errorf("line %d twice or missing: %s", o.Line, l)
		}
		out[o.Line] = o
	}
	return out
}

func writeLines(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBatchInterrupted: Ctrl-C during a batch stops waiting, not the jobs.
// A job already submitted keeps running and its --out line names it by its
// real id with its current status; a line not yet submitted is not
// submitted afterwards, and says so.
func TestBatchInterrupted(t *testing.T) {
	nc, _ := startWorker(t)
	sub, err := nc.SubscribeSync("agent.events.*.blocking")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe() //nolint:errcheck
	in := writeLines(t, `"block"`, `"echo:never"`, `{"id":"never-3","task":"echo:never"}`)
	out := filepath.Join(t.TempDir(), "results.jsonl")

	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	type ran struct {
		code   int
		stderr string
	}
	done := make(chan ran, 1)
	go func() {
		var o, e bytes.Buffer
		code := run(ctx, []string{"--file", in, "--out", out, "--parallel", "1"}, strings.NewReader(""), &o, &e)
		done <- ran{code, e.String()}
	}()
	m, err := sub.NextMsg(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ev jobs.Event
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		t.Fatal(err)
	}
	interrupt()
	var res ran
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("batch did not return after the interrupt")
	}
	if res.code != 1 || !strings.Contains(res.stderr, "interrupted: 1 job still going on") ||
		!strings.Contains(res.stderr, "2 lines not submitted") {
		t.Errorf("exit %d\n%s", res.code, res.stderr)
	}

	got := readOut(t, out)
	if r := got[1]; r.ID != ev.JobID || r.Status != jobs.StatusRunning || !strings.Contains(r.Error, "submit watch "+ev.JobID) {
		t.Errorf("line 1: want job %s running, got %+v", ev.JobID, r)
	}
	for _, n := range []int{2, 3} {
		if r := got[n]; r.Status != jobs.StatusFailed || !strings.Contains(r.Error, "not submitted") {
			t.Errorf("line %d: %+v", n, r)
		}
	}
	if st := submitCmd(t, "", "status", "never-3"); !strings.Contains(st.stderr, "job not found") {
		t.Errorf("line 3 was submitted after the interrupt: %+v", st)
	}
	if st := submitCmd(t, "", "status", "--json", ev.JobID); !strings.Contains(st.stdout, `"status":"running"`) {
		t.Errorf("the interrupted batch's job should go on: %+v", st)
	}
	if c := submitCmd(t, "", "cancel", ev.JobID); c.code != 0 {
		t.Errorf("cancel %+v", c)
	}
}

// TestBatchDetach: --detach with --file submits every line and returns,
// writing one receipt per line (its state then) without waiting.
func TestBatchDetach(t *testing.T) {
	startWorker(t)
	in := writeLines(t, `"block"`, `{"id":"bd-2","task":"echo:b"}`, `{"task":""}`)
	out := filepath.Join(t.TempDir(), "results.jsonl")
	res := submitCmd(t, "", "--file", in, "--out", out, "--detach")
	if res.code != 1 || !strings.Contains(res.stderr, "3 jobs: 2 submitted, 1 not") {
		t.Fatalf("%+v", res)
	}
	got := readOut(t, out)
	if r := got[1]; r.Status.Terminal() || r.ID == "" {
		t.Errorf("line 1: want a queued receipt, got %+v", r)
	}
	// The receipt is the state when it was written: an echo job a worker
	// took at once may be running or even done by then.
	if r := got[2]; r.ID != "bd-2" || (r.Status.Terminal() && r.Status != jobs.StatusSucceeded) {
		t.Errorf("line 2: %+v", r)
	}
	if r := got[3]; r.Status != jobs.StatusFailed || !strings.Contains(r.Error, "minLength") {
		t.Errorf("line 3: %+v", r)
	}
	if w := submitCmd(t, "", "watch", "bd-2"); w.code != 0 || w.stdout != "b\n" {
		t.Errorf("watch %+v", w)
	}
	if c := submitCmd(t, "", "cancel", got[1].ID); c.code != 0 {
		t.Errorf("cancel %+v", c)
	}
}

// TestBatchJobDefaults: --job gives defaults to every line, objects too;
// a --job file with an id cannot serve a batch (every line would share it).
func TestBatchJobDefaults(t *testing.T) {
	startWorker(t)
	dir := t.TempDir()
	base := filepath.Join(dir, "base.json")
	if err := os.WriteFile(base, []byte(`{"metadata":{"team":"a","row":"?"},"max_rounds":3}`), 0o600); err != nil {
		t.Fatal(err)
	}
	in := writeLines(t, `{"id":"bj-1","task":"echo:x","metadata":{"row":"1"}}`, `"echo:y"`)
	out := filepath.Join(dir, "results.jsonl")
	if res := submitCmd(t, "", "--file", in, "--out", out, "--job", base); res.code != 0 {
		t.Fatalf("%+v", res)
	}
	got := readOut(t, out)
	if md := got[1].Metadata; md["team"] != "a" || md["row"] != "1" {
		t.Errorf("line 1 metadata %v", md)
	}
	if md := got[2].Metadata; md["team"] != "a" || md["row"] != "?" {
		t.Errorf("line 2 metadata %v", md)
	}

	withID := filepath.Join(dir, "with-id.json")
	if err := os.WriteFile(withID, []byte(`{"id":"shared"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if res := submitCmd(t, "", "--file", in, "--job", withID); res.code != 2 || !strings.Contains(res.stderr, "id") {
		t.Errorf("--job with an id in a batch: %+v", res)
	}
}

// TestBatchWithoutJobs: a batch with no job lines (an empty file, blank
// lines, comments only, an empty stdin) is a usage error naming the file,
// before anything is published or --out written. It used to report
// "0 jobs" and exit 0, as if the batch had gone well.
func TestBatchWithoutJobs(t *testing.T) {
	nc, _ := startWorker(t)
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.jsonl")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, stdin string
		args        []string
		want        string
	}{
		{"empty file", "", []string{"--file", empty}, "no jobs in " + empty},
		{"blank lines", "", []string{"--file", writeLines(t, "", "   ", "\t")}, "no jobs in "},
		{"comments only", "", []string{"--file", writeLines(t, "# tasks for tomorrow", "#")}, "no jobs in "},
		{"detached", "", []string{"--file", empty, "--detach"}, "no jobs in " + empty},
		{"empty stdin", "", []string{"--file", "-"}, "no jobs in standard input"},
		{"stdin of comments", "# nothing yet\n\n", []string{"--file", "-", "--json"}, "no jobs in standard input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "results.jsonl")
			res := submitCmd(t, tc.stdin, append(tc.args, "--out", out)...)
			if res.code != exitUsage || !strings.Contains(res.stderr, tc.want) || res.stdout != "" {
				t.Errorf("want exit %d and %q\ngot %+v", exitUsage, tc.want, res)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("--out was written: %v", err)
			}
		})
	}
	// Nothing reached NATS.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "AGENT_JOBS")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(ctx); err != nil || info.State.LastSeq != 0 {
		t.Errorf("jobs stream: %+v, %v; want nothing published", info.State, err)
	}
	// A batch of one line still runs.
	if res := submitCmd(t, "", "--file", writeLines(t, "# one job", `"echo:hi"`)); res.code != exitOK {
		t.Errorf("one-line batch: %+v", res)
	}
}

// TestBatchOutIsNotTheBatchFile: --out naming the batch file itself (or a
// link to it) replaced the jobs with the results, exit 0. It is refused
// before anything is read, published or written.
func TestBatchOutIsNotTheBatchFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	batch := writeLines(t, `"echo:a"`, `"echo:b"`)
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink(batch, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, file, out string }{
		{"the same path", batch, batch},
		{"a symlink to it", batch, link},
		{"through the symlink", link, batch},
	} {
		res := runQuiet("--file", tc.file, "--out", tc.out)
		if res.code != exitUsage || !strings.Contains(res.stderr, "--out "+tc.out+" is the batch file --file "+tc.file) {
			t.Errorf("%s: want exit %d refusing it, got %+v", tc.name, exitUsage, res)
		}
		if got, err := os.ReadFile(batch); err != nil || string(got) != "\"echo:a\"\n\"echo:b\"\n" {
			t.Errorf("%s: the batch file is now %q (%v)", tc.name, got, err)
		}
	}
}
