package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetagent/jetagent/internal/jobs"
	"github.com/jetagent/jetagent/internal/natstest"
)

// TestJobFileCheckedLikeTheWorker: a --job file or a batch line is held to
// the job schema as written, so a misspelt or mistyped field is refused
// with the very reason a worker would dead-letter it with, instead of
// being dropped or reworded by Go's JSON decoding.
func TestJobFileCheckedLikeTheWorker(t *testing.T) {
	startWorker(t)
	v, err := jobs.NewValidator(4096)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name, file string
		batchErr   string // a batch line's own words, when not the worker's
	}{
		{name: "misspelt field", file: `{"task":"echo:x","tool_mdoe":"full"}`},
		{name: "wrong type", file: `{"task":"echo:x","max_rounds":"5"}`},
		{name: "wrong case", file: `{"Task":"echo:x"}`},
		{name: "not JSON", file: `{"task": "echo:x",}`},
		{name: "not an object", file: `["echo:x"]`, batchErr: "want a JSON object (a job) or a JSON string (a task)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, workerErr := v.DecodeJob([]byte(tc.file))
			if workerErr == nil {
				t.Fatalf("the worker accepts %s", tc.file)
			}
			job := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			if err := os.WriteFile(job, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			id := "jobfile-" + strings.ReplaceAll(tc.name, " ", "-")
			res := submitCmd(t, "", "--job", job, "--id", id)
			if res.code != 1 || !strings.Contains(res.stderr, workerErr.Error()) {
				t.Errorf("want exit 1 and %q\ngot %+v", workerErr, res)
			}
			if st := submitCmd(t, "", "status", id); !strings.Contains(st.stderr, "job not found") {
				t.Errorf("the refused job was published: %+v", st)
			}

			batch := filepath.Join(dir, "batch.jsonl")
			if err := os.WriteFile(batch, []byte(`"echo:fine"`+"\n"+tc.file+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			res = submitCmd(t, "", "--file", batch)
			want := workerErr.Error()
			if tc.batchErr != "" {
				want = tc.batchErr
			}
			if res.code != 1 || !strings.Contains(res.stderr, "line 2: failed: "+want) ||
				!strings.Contains(res.stderr, "2 jobs: 1 succeeded, 1 did not") {
				t.Errorf("batch: want line 2 refused with %q\ngot %+v", want, res)
			}
		})
	}

	// A glob path.Match cannot read passes the schema; the worker would
	// take the job and fail it at its start.
	t.Run("bad glob", func(t *testing.T) {
		for _, tc := range []struct{ file, want string }{
			{`{"task":"echo:x","allow":["["]}`, `allow[0]: bad glob "[": syntax error in pattern`},
			{`{"task":"echo:x","deny":["ok","a[b"]}`, `deny[1]: bad glob "a[b": syntax error in pattern`},
		} {
			job := filepath.Join(dir, "glob.json")
			if err := os.WriteFile(job, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			res := submitCmd(t, "", "--job", job, "--id", "jobfile-glob")
			if res.code != 1 || !strings.Contains(res.stderr, "--job "+job+": "+tc.want) {
				t.Errorf("%s: want exit 1 and %q\ngot %+v", tc.file, tc.want, res)
			}
			if st := submitCmd(t, "", "status", "jobfile-glob"); !strings.Contains(st.stderr, "job not found") {
				t.Errorf("the refused job was published: %+v", st)
			}
			batch := filepath.Join(dir, "glob.jsonl")
			if err := os.WriteFile(batch, []byte(`"echo:fine"`+"\n"+tc.file+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			res = submitCmd(t, "", "--file", batch)
			if res.code != 1 || !strings.Contains(res.stderr, "line 2: failed: "+tc.want) ||
				!strings.Contains(res.stderr, "2 jobs: 1 succeeded, 1 did not") {
				t.Errorf("batch %s: want line 2 refused with %q\ngot %+v", tc.file, tc.want, res)
			}
		}
	})

	// Declarations job.schema.json takes but the worker's door refuses:
	// the job was published and dead-lettered.
	t.Run("bad client tool declaration", func(t *testing.T) {
		secret := strings.Repeat("s", 43)
		for _, tc := range []struct{ schema, want string }{
			{`{"type":"object","properties":{"a":{"type":"nope"}}}`, `client tool "mytool": input_schema: "mem:///client-tool.json#" is not valid against metaschema`},
			{`{"type":"string"}`, `client tool "mytool": input_schema: its type is "string", not "object"`},
			{`{"$ref":"/etc/passwd"}`, `client tool "mytool": input_schema:`},
		} {
			file := `{"task":"echo:x","client_secret":"` + secret + `","client_tools":[{"name":"mytool","input_schema":` + tc.schema + `}]}`
			job := filepath.Join(dir, "decl.json")
			if err := os.WriteFile(job, []byte(file), 0o600); err != nil {
				t.Fatal(err)
			}
			res := submitCmd(t, "", "--job", job, "--id", "jobfile-decl")
			if res.code != 1 || !strings.Contains(res.stderr, "--job "+job+": ") || !strings.Contains(res.stderr, tc.want) {
				t.Errorf("%s: want exit 1 and %q\ngot %+v", tc.schema, tc.want, res)
			}
			if st := submitCmd(t, "", "status", "jobfile-decl"); !strings.Contains(st.stderr, "job not found") {
				t.Errorf("the refused job was published: %+v", st)
			}
			batch := filepath.Join(dir, "decl.jsonl")
			if err := os.WriteFile(batch, []byte(`"echo:fine"`+"\n"+file+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			res = submitCmd(t, "", "--file", batch)
			if res.code != 1 || !strings.Contains(res.stderr, "line 2: failed: ") || !strings.Contains(res.stderr, tc.want) ||
				!strings.Contains(res.stderr, "2 jobs: 1 succeeded, 1 did not") {
				t.Errorf("batch %s: want line 2 refused with %q\ngot %+v", tc.schema, tc.want, res)
			}
		}
	})

	t.Run("task from the command line completes a job file", func(t *testing.T) {
		job := filepath.Join(dir, "no-task.json")
		if err := os.WriteFile(job, []byte(`{"max_rounds":3,"metadata":{"k":"v"}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if res := submitCmd(t, "", "--job", job, "echo:ok"); res.code != 0 || res.stdout != "ok\n" {
			t.Errorf("%+v", res)
		}
	})
}

// TestUsageErrors: a job id that can never exist is a usage error (watch
// would otherwise wait for it forever), and a bad flag is reported once.
func TestUsageErrors(t *testing.T) {
	startWorker(t)
	for _, cmd := range []string{"status", "watch", "transcript", "cancel"} {
		for _, id := range []string{"a.b", "a b", "*", strings.Repeat("x", 129)} {
			res := submitCmd(t, "", cmd, id)
			if res.code != 2 || !strings.Contains(res.stderr, "is not a job id") {
				t.Errorf("%s %q: %+v", cmd, id, res)
			}
		}
	}
	res := submitCmd(t, "", "--bogus", "echo:x")
	if res.code != 2 || strings.Count(res.stderr, "-bogus") != 1 {
		t.Errorf("bad flag: %+v", res)
	}
	res = submitCmd(t, "", "status", "--bogus", "x")
	if res.code != 2 || strings.Count(res.stderr, "-bogus") != 1 || strings.Contains(res.stderr, "did you mean") {
		t.Errorf("bad flag of status: %+v", res)
	}
	// A misspelt flag is named with the one it stands for, of the command
	// given.
	for _, tt := range []struct{ args, want []string }{
		{[]string{"--quue", "fast", "echo:x"}, []string{"unknown flag: --quue: did you mean --queue?"}},
		{[]string{"--max-round", "3", "echo:x"}, []string{"did you mean --max-rounds?"}},
		{[]string{"status", "--jsno", "x"}, []string{"did you mean --json?"}},
	} {
		if res := submitCmd(t, "", tt.args...); res.code != 2 || !strings.Contains(res.stderr, tt.want[0]) {
			t.Errorf("%q: %+v", tt.args, res)
		}
	}
}

// TestQueueWithoutWorkers: a job sent to a queue no worker has ever served
// (a typo, a worker not yet deployed) is queued, with a warning saying why
// it will wait.
func TestQueueWithoutWorkers(t *testing.T) {
	startWorker(t)
	res := submitCmd(t, "", "--detach", "--id", "nobody-1", "--queue", "nobody", "echo:x")
	if res.code != 0 || res.stdout != "nobody-1\n" || !strings.Contains(res.stderr, `no worker has served queue "nobody"`) ||
		strings.Contains(res.stderr, "did you mean") {
		t.Errorf("%+v", res)
	}
	// submit status of the job says why it stays queued.
	if res := submitCmd(t, "", "status", "nobody-1"); res.code != 0 || !strings.Contains(res.stdout, "queued") ||
		!strings.Contains(res.stderr, `no worker has served queue "nobody"`) {
		t.Errorf("status: %+v", res)
	}
	// A typo of a served queue is named.
	res = submitCmd(t, "", "--detach", "--id", "typo-1", "--queue", "defualt", "echo:x")
	if res.code != 0 || !strings.Contains(res.stderr, `no worker has served queue "defualt"`) ||
		!strings.Contains(res.stderr, "(did you mean --queue default?)") {
		t.Errorf("typo: %+v", res)
	}
	if res := submitCmd(t, "", "--detach", "echo:x"); strings.Contains(res.stderr, "no worker") {
		t.Errorf("warning for the served default queue: %+v", res)
	}
	in := writeLines(t, `{"id":"nobody-2","queue":"nobody","task":"echo:x"}`, `{"id":"nobody-3","queue":"nobody","task":"echo:x"}`)
	res = submitCmd(t, "", "--file", in, "--detach")
	if res.code != 0 || strings.Count(res.stderr, `no worker has served queue "nobody"`) != 1 {
		t.Errorf("batch: want one warning: %+v", res)
	}
	for _, id := range []string{"nobody-1", "nobody-2", "nobody-3", "typo-1"} {
		if res := submitCmd(t, "", "cancel", id); res.code != 0 {
			t.Errorf("cancel %+v", res)
		}
	}
}

// TestTranscriptMissing: asking for a transcript that does not exist says
// why: no such job, the job has not ended, or it ended without one.
func TestTranscriptMissing(t *testing.T) {
	nc, _ := startWorker(t)
	if res := submitCmd(t, "", "transcript", "no-such-job"); res.code != 1 || !strings.Contains(res.stderr, "no job no-such-job") {
		t.Errorf("unknown job: %+v", res)
	}
	if res := submitCmd(t, "", "--servers", "nope", "--id", "dead-1", "echo:x"); res.code != 1 {
		t.Fatalf("%+v", res)
	}
	res := submitCmd(t, "", "transcript", "dead-1")
	if res.code != 1 || !strings.Contains(res.stderr, "job dead-1 ended dead without a transcript: job names an MCP server") {
		t.Errorf("dead job: %+v", res)
	}
	// The transcripts bucket full: the worker's reason is in the result.
	st := `{"id":"full-1","status":"succeeded","result":{"id":"full-1","status":"succeeded","transcript_error":"nats: API error: code=503 err_code=10077 description=maximum bytes exceeded"}}`
	if _, err := stateBucket(t, nc).Put(natstest.Context(t), "full-1", []byte(st)); err != nil {
		t.Fatal(err)
	}
	res = submitCmd(t, "", "transcript", "full-1")
	if want := "job full-1 ended succeeded without a transcript: the worker could not store it: nats: API error: code=503 err_code=10077 description=maximum bytes exceeded"; res.code != 1 || !strings.Contains(res.stderr, want) {
		t.Errorf("transcript not stored: %+v", res)
	}
	sub, err := nc.SubscribeSync("agent.events.running-1.blocking")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe() //nolint:errcheck
	if res := submitCmd(t, "", "--detach", "--id", "running-1", "block"); res.code != 0 {
		t.Fatalf("%+v", res)
	}
	if _, err := sub.NextMsg(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	res = submitCmd(t, "", "transcript", "running-1")
	if res.code != 1 || !strings.Contains(res.stderr, "job running-1 is running: its transcript is stored when it ends") {
		t.Errorf("running job: %+v", res)
	}
	if res := submitCmd(t, "", "cancel", "running-1"); res.code != 0 {
		t.Errorf("cancel %+v", res)
	}
}

// TestResubmitFinishedID: an id whose job has ended is not run again; the
// submitter is told so, and how to run the task again. (The same task:
// the id with another task is refused, TestSubmitIDCollisions.)
func TestResubmitFinishedID(t *testing.T) {
	startWorker(t)
	if res := submitCmd(t, "", "--id", "rerun", "fail:once"); res.code != 1 {
		t.Fatalf("%+v", res)
	}
	for _, args := range [][]string{{"--id", "rerun", "fail:once"}, {"--detach", "--id", "rerun", "fail:once"}} {
		res := submitCmd(t, "", args...)
		if !strings.Contains(res.stderr, "job rerun already ended (failed); not queued again: another --id runs it again") {
			t.Errorf("%v: %+v", args, res)
		}
	}
}

// TestNoServers: --servers "" (or "servers": [] in a job file or a batch
// line) asks for no MCP servers. jobs.Job's omitempty dropped the empty
// list, so the job reached the worker without it, which gives it every
// server (submit refused such jobs until jobs.Job kept the list). The
// worker must see an empty list, and a job without servers every server.
func TestNoServers(t *testing.T) {
	startWorker(t)
	dir := t.TempDir()
	job := filepath.Join(dir, "none.json")
	batch := filepath.Join(dir, "none.jsonl")
	for _, f := range []string{job, batch} {
		if err := os.WriteFile(f, []byte(`{"task":"servers:","servers":[]}`+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"flag", []string{"--servers", "", "servers:"}},
		{"flag, only commas", []string{"--servers", ",", "servers:"}},
		{"job file", []string{"--job", job}},
		{"batch line", []string{"--file", batch, "--json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := submitCmd(t, "", tc.args...)
			answer := strings.TrimSuffix(res.stdout, "\n")
			if slices.Contains(tc.args, "--json") {
				var line jobs.Result // a batch's --json line: the result and its line number
				if err := json.Unmarshal([]byte(res.stdout), &line); err != nil {
					t.Fatalf("%v: %+v", err, res)
				}
				answer = line.Answer
			}
			// echoRunner answers "none" for a job whose servers list is
			// empty, "all" for one without it.
			if res.code != exitOK || answer != "none" {
				t.Errorf("want the job run with no servers (answer none)\ngot %+v", res)
			}
		})
	}
	if res := submitCmd(t, "", "servers:"); res.code != exitOK || res.stdout != "all\n" {
		t.Errorf("no --servers: want every server, got %+v", res)
	}
	if res := submitCmd(t, "", "--help"); !strings.Contains(res.stdout+res.stderr, `(default: all; "": none)`) {
		t.Errorf("--help does not offer --servers \"\": %+v", res)
	}
}
