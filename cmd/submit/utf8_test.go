package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTextNotUTF8Refused: text that is not UTF-8 (a Latin-1 file, a binary
// piped in) or a JSON string with half a UTF-16 pair is refused before
// anything is published. Go's JSON encoding and decoding turn each such
// byte or escape into U+FFFD, so the job reached the worker changed ("café"
// in Latin-1 ran as "caf\ufffd"), while a batch line holding the same text
// in an object, or a job published as it is, is refused (dead-lettered) for it.
func TestTextNotUTF8Refused(t *testing.T) {
	startWorker(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		code  int
		want  string
	}{
		{name: "task argument", args: []string{"--id", "utf8-arg", "echo:caf\xe9"}, code: 1,
			want: "the task is not valid UTF-8 (at byte 8)"},
		{name: "task on stdin", args: []string{"--id", "utf8-stdin"}, stdin: "echo:\xff\xfe binary", code: 1,
			want: "the task is not valid UTF-8 (at byte 5)"},
		{name: "system flag", args: []string{"--id", "utf8-system", "--system", "be \xe9", "echo:x"}, code: 2,
			want: "--system is not valid UTF-8 (at byte 3)"},
		{name: "model flag", args: []string{"--id", "utf8-model", "--model", "m\xff", "echo:x"}, code: 2,
			want: "--model is not valid UTF-8 (at byte 1)"},
		{name: "meta flag", args: []string{"--id", "utf8-meta", "--meta", "k=v\xe9", "echo:x"}, code: 2,
			want: "--meta is not valid UTF-8 (at byte 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := submitCmd(t, tc.stdin, tc.args...)
			if res.code != tc.code || !strings.Contains(res.stderr, tc.want) {
				t.Errorf("want exit %d and %q\ngot %+v", tc.code, tc.want, res)
			}
			id := tc.args[1]
			if st := submitCmd(t, "", "status", id); !strings.Contains(st.stderr, "job not found") {
				t.Errorf("the refused job was published: %+v", st)
			}
		})
	}

	for _, tc := range []struct{ name, line, want string }{
		{"latin-1 string line", "\"echo:caf\xe9\"", "the task is not valid UTF-8 (at byte 9)"},
		{"latin-1 object line", "{\"task\":\"echo:caf\xe9\"}", "job is not JSON: not valid UTF-8 (at byte 17)"},
		{"lone high surrogate", `"echo:a\ud800b"`, `job is not JSON: a high surrogate with no low one after it at byte 7 (\ud800`},
		{"lone low surrogate", `"echo:\udc00"`, `job is not JSON: a low surrogate with no high one before it at byte 6 (\udc00`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			batch := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".jsonl")
			if err := os.WriteFile(batch, []byte(`"echo:fine"`+"\n"+tc.line+"\n"+`"echo:\ud83d\ude00 a pair"`+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			res := submitCmd(t, "", "--file", batch)
			if res.code != 1 || !strings.Contains(res.stderr, "line 2: failed: "+tc.want) ||
				!strings.Contains(res.stderr, "3 jobs: 2 succeeded, 1 did not") {
				t.Errorf("want line 2 refused with %q\ngot %+v", tc.want, res)
			}
		})
	}
}
