package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandLikeWordsAreNotTasks: "submit wait ID", "submit stauts ID"
// and the like are refused with the command meant (exit 2), instead of
// queueing the task "wait ID" for a model; the same words quoted, after
// "--" or in a longer task are a task as before.
func TestCommandLikeWordsAreNotTasks(t *testing.T) {
	_, r := startWorker(t)
	for _, tt := range []struct {
		args  []string
		code  int
		want  string // in stderr (refused) or the id printed (queued)
		ranAs string // the task a worker ran ("" for a refused line)
	}{
		{args: []string{"wait", "job-1"}, code: 2, want: `"wait" is not a command: did you mean submit watch --wait job-1?`},
		{args: []string{"events", "job-1"}, code: 2, want: "did you mean submit watch job-1?"},
		{args: []string{"stauts", "job-1"}, code: 2, want: "did you mean submit status job-1?"},
		{args: []string{"wacth", "job-1"}, code: 2, want: "did you mean submit watch job-1?"},
		{args: []string{"cancle", "job-1"}, code: 2, want: "did you mean submit cancel job-1?"},
		{args: []string{"transcirpt", "job-1"}, code: 2, want: "did you mean submit transcript job-1?"},
		{args: []string{"--detach", "stop", "job-1"}, code: 2, want: `(to submit the task "stop job-1", quote it or give it after --)`},
		{args: []string{"Wait", "job-1", "--detach"}, code: 2, want: "did you mean submit watch --wait job-1?"},
		{args: []string{"--detach", "--id", "cw-quoted", "wait job-1"}, want: "cw-quoted", ranAs: "wait job-1"},
		{args: []string{"--detach", "--id", "cw-dash", "--", "wait", "job-1"}, want: "cw-dash", ranAs: "wait job-1"},
		{args: []string{"--detach", "--id", "cw-long", "stop", "the", "build"}, want: "cw-long", ranAs: "stop the build"},
		{args: []string{"--detach", "--id", "cw-other", "echo:hello", "job-1"}, want: "cw-other", ranAs: "echo:hello job-1"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			res := submitCmd(t, "", tt.args...)
			if res.code != tt.code {
				t.Fatalf("exit %d, want %d: %+v", res.code, tt.code, res)
			}
			if tt.ranAs == "" {
				if !strings.Contains(res.stderr, tt.want) || res.stdout != "" {
					t.Errorf("stderr %q lacks %q (stdout %q)", res.stderr, tt.want, res.stdout)
				}
				return
			}
			if strings.TrimSpace(res.stdout) != tt.want {
				t.Fatalf("%+v", res)
			}
			st := submitCmd(t, "", "status", "--json", tt.want)
			if st.code != 0 || !strings.Contains(st.stdout, `"task":"`+tt.ranAs+`"`) {
				t.Errorf("status %+v", st)
			}
		})
	}
	if n := r.count("job-1"); n != 0 {
		t.Errorf("job-1 ran %d times", n)
	}
}

// TestSubmitIDCollisions: an id given again with the same task is the
// idempotent resubmission (the earlier job's outcome, exit 0); with
// another task it is refused (exit 1), saying which job holds the id,
// and never given that job's answer; an empty --id (an unset variable) is
// refused instead of replaced by a fresh id; ids that cannot be subject
// tokens are refused at once; a task of white space only, in a --job file
// or a batch line, is refused before publishing with the worker's reason.
func TestSubmitIDCollisions(t *testing.T) {
	_, r := startWorker(t)
	if res := submitCmd(t, "", "--id", "coll-done", "echo:first"); res.code != 0 || strings.TrimSpace(res.stdout) != "first" {
		t.Fatalf("first submission %+v", res)
	}
	if res := submitCmd(t, "", "--detach", "--id", "coll-queued", "block"); res.code != 0 {
		t.Fatalf("first detached submission %+v", res)
	}
	blank := filepath.Join(t.TempDir(), "blank.json")
	if err := os.WriteFile(blank, []byte(`{"task":" \t "}`), 0o600); err != nil {
		t.Fatal(err)
	}
	batch := writeLines(t, `{"id":"coll-b1","task":"   "}`, `"  \t "`, `{"id":"coll-b3","task":"a","task":"b"}`)
	also := map[string][]string{ // more that stderr must say
		"blank tasks and a doubled member in a batch": {
			"line 1: failed: job fails schemas/job.schema.json: at '/task': only white space",
			"line 2: failed: job fails schemas/job.schema.json: at '/task': only white space",
			`line 3: failed: job is not JSON: member "task" appears twice at ''`,
		},
	}
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stdout string // exactly, trimmed
		want   string // in stderr
	}{
		{"same id same task", []string{"--id", "coll-done", "echo:first"}, 0, "first", "job coll-done already ended (succeeded)"},
		{"same id other task", []string{"--id", "coll-done", "echo:second"}, 1, "",
			`job id coll-done is taken by another job (succeeded, task "echo:first"): this task was not queued; give it its own --id`},
		{"same id other task detached", []string{"--detach", "--id", "coll-done", "echo:second"}, 1, "", "is taken by another job"},
		{"queued id other task", []string{"--detach", "--id", "coll-queued", "echo:other"}, 1, "",
			`job id coll-queued is taken by another job (`},
		{"queued id same task", []string{"--detach", "--id", "coll-queued", "block"}, 0, "coll-queued", "was submitted before"},
		{"empty id", []string{"--detach", "--id", "", "echo:x"}, 2, "", "--id is empty"},
		{"space", []string{"--detach", "--id", "a b", "echo:x"}, 1, "", `at '/id': 'a b' does not match pattern`},
		{"dot", []string{"--detach", "--id", "a.b", "echo:x"}, 1, "", `at '/id': 'a.b' does not match pattern`},
		{"star", []string{"--detach", "--id", "a*", "echo:x"}, 1, "", `at '/id': 'a*' does not match pattern`},
		{"gt", []string{"--detach", "--id", "a>", "echo:x"}, 1, "", `at '/id': 'a>' does not match pattern`},
		{"unicode", []string{"--detach", "--id", "héllo", "echo:x"}, 1, "", `at '/id': 'héllo' does not match pattern`},
		{"1 KB", []string{"--detach", "--id", strings.Repeat("k", 1024), "echo:x"}, 1, "", "does not match pattern"},
		{"underscore", []string{"--detach", "--id", "_mine", "echo:x"}, 1, "", `at '/id': '_mine' does not match pattern`},
		{"blank task in --job", []string{"--detach", "--job", blank}, 1, "",
			"--job " + blank + ": job fails schemas/job.schema.json: at '/task': only white space"},
		{"blank tasks and a doubled member in a batch", []string{"--detach", "--file", batch}, 1, "", "3 jobs: 0 submitted, 3 not"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := submitCmd(t, "", tt.args...)
			if res.code != tt.code || strings.TrimSpace(res.stdout) != tt.stdout || !strings.Contains(res.stderr, tt.want) {
				t.Errorf("exit %d stdout %q stderr %q\nwant exit %d stdout %q stderr with %q",
					res.code, res.stdout, res.stderr, tt.code, tt.stdout, tt.want)
			}
			for _, w := range also[tt.name] {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("stderr %q lacks %q", res.stderr, w)
				}
			}
		})
	}
	if n := r.count("coll-done"); n != 1 {
		t.Errorf("coll-done ran %d times", n)
	}
}
