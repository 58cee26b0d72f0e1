package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
			// Refused lines are named by their ids (line 2 has none).
			"line 1: coll-b1 failed: job fails schemas/job.schema.json: at '/task': only white space",
			"line 2: failed: job fails schemas/job.schema.json: at '/task': only white space",
			`line 3: coll-b3 failed: job is not JSON: member "task" appears twice at ''`,
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

// TestBatchHostileLines: every line of a batch is reported by its number,
// and the valid ones are submitted whatever the others hold: a blank line
// and a comment are skipped, a malformed line, unknown fields and a
// repeated id are refused, and a line longer than any job (it stopped the
// whole batch with "bufio.Scanner: token too long", naming no line) is
// refused as too large. A 10,000-line file is submitted whole.
func TestBatchHostileLines(t *testing.T) {
	startWorker(t)
	huge := `{"id":"hl-huge","task":"` + strings.Repeat("a", 17<<20) + `"}`
	many := make([]string, 10000)
	for i := range many {
		many[i] = `{"id":"hl-many-` + strconv.Itoa(i) + `","task":"echo:x","queue":"parked"}`
	}
	for _, tt := range []struct {
		name  string
		lines []string
		want  map[int]string // line → status, or the start of its error
		total string         // the summary line
		ids   map[int]string // line → the id its result names, where checked
	}{
		{"mixed", []string{
			`{"id":"hl-1","task":"echo:one","queue":"parked"}`,
			``,
			`# a comment`,
			`{"id":"hl-2","task":`,
			`{"id":"hl-3","task":"echo:x","colour":"red"}`,
			`{"id":"hl-1","task":"echo:again","queue":"parked"}`,
			`   `,
			`"a string task"`,
			`{"id":"bad id \u001b[2J","task":"echo:x"}`,
		}, map[int]string{
			1: "queued",
			4: "job is not JSON: unexpected EOF",
			5: "job fails schemas/job.schema.json: at '': additional properties 'colour' not allowed",
			6: "duplicate job id: id hl-1 is also on line 1",
			8: "queued",
			9: "job fails schemas/job.schema.json: at '/id'",
		}, "6 jobs: 2 submitted, 4 not",
			// A line refused by the schema is named by its own id; one that is
			// no JSON has none to give.
			map[int]string{4: "line-4", 5: "hl-3", 9: "line-9"}},
		{"encodings", []string{
			"\ufeff\"a task after a byte order mark\"",
			`"unterminated`,
			`"two" "strings"`,
			`"fine"`,
		}, map[int]string{
			1: "the line starts with a UTF-8 byte order mark",
			2: "task is not a JSON string: unexpected end of JSON input",
			3: "task is not a JSON string: invalid character",
			4: "queued",
		}, "4 jobs: 1 submitted, 3 not", nil},
		{"a line longer than any job", []string{
			`{"id":"hl-before","task":"echo:x","queue":"parked"}`, huge, `{"id":"hl-after","task":"echo:x","queue":"parked"}`,
		}, map[int]string{1: "queued", 2: "job too large: line of 17825818 bytes, limit 4096", 3: "queued"},
			"3 jobs: 2 submitted, 1 not", nil},
		{"10,000 lines", many, nil, "10000 jobs: 10000 submitted, 0 not", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := writeLines(t, tt.lines...)
			out := filepath.Join(t.TempDir(), "out.jsonl")
			// The lines go to a queue no worker serves: submitted, not run.
			res := submitCmd(t, "", "--file", in, "--detach", "--queue", "parked", "--out", out)
			if !strings.Contains(res.stderr, tt.total) {
				t.Fatalf("stderr lacks %q: exit %d, %.2000s", tt.total, res.code, res.stderr)
			}
			wantCode := 1 // a line was not submitted
			if strings.HasSuffix(tt.total, ", 0 not") {
				wantCode = 0
			}
			if res.code != wantCode {
				t.Errorf("exit %d, want %d", res.code, wantCode)
			}
			got := readOut(t, out)
			if tt.want == nil {
				if len(got) != len(tt.lines) {
					t.Errorf("%d results, want %d", len(got), len(tt.lines))
				}
				return
			}
			if len(got) != len(tt.want) {
				t.Errorf("results for lines %v, want %v", keys(got), tt.want)
			}
			for n, id := range tt.ids {
				if got[n].ID != id {
					t.Errorf("line %d: result names %q, want %q", n, got[n].ID, id)
				}
			}
			for n, want := range tt.want {
				l := got[n]
				if string(l.Status) != want && (l.Status != "failed" || !strings.HasPrefix(l.Error, want)) {
					t.Errorf("line %d: %s %q, want %q", n, l.Status, l.Error, want)
				}
			}
		})
	}
}

func keys(m map[int]outLine) []int {
	var k []int
	for n := range m {
		k = append(k, n)
	}
	slices.Sort(k)
	return k
}
