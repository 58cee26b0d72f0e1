package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/jetagent/jetagent/internal/jobs"
)

// utf16LE is s in UTF-16, little-endian (PowerShell's default for > and
// Out-File), with its byte order mark when bom.
func utf16LE(s string, bom bool) []byte {
	if bom {
		s = "\ufeff" + s
	}
	var b []byte
	for _, u := range utf16.Encode([]rune(s)) {
		b = append(b, byte(u), byte(u>>8))
	}
	return b
}

// TestUTF16Refused: a batch file saved as UTF-16 (PowerShell's > and
// Out-File) had each line refused as "want a JSON object (a job) or a JSON
// string (a task)", plus a line of its own for the NUL after the last
// newline: nothing said the file's encoding was wrong. A task piped as
// UTF-16 was advised iconv -f LATIN1. Each now names UTF-16.
func TestUTF16Refused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lines := "\"echo:a\"\r\n\"echo:b\"\r\n"
	withBOM := filepath.Join(dir, "bom.jsonl")
	noBOM := filepath.Join(dir, "nobom.jsonl")
	for p, b := range map[string][]byte{withBOM: utf16LE(lines, true), noBOM: utf16LE(lines, false)} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"batch", "", []string{"--file", withBOM, "--detach"}, exitFailed,
			"--file " + withBOM + ": the file is UTF-16 (it starts with a UTF-16 byte order mark"},
		{"task on stdin", string(utf16LE("echo:a", true)), []string{"--detach"}, exitFailed,
			"the task is UTF-16 text (it starts with a UTF-16 byte order mark), not UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := submitCmd(t, tc.stdin, tc.args...)
			if res.code != tc.code || !strings.Contains(res.stderr, tc.want) {
				t.Errorf("want exit %d and %q\ngot %+v", tc.code, tc.want, res)
			}
		})
	}
	// Without its byte order mark, each line says so (a batch's lines are
	// read before anything connects; refused, none is submitted).
	c := &cli{settings: Settings{MaxJobBytes: 4096}}
	f, err := os.Open(noBOM)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := c.readBatch(f, &jobFlags{set: map[string]bool{}}, &jobs.Job{})
	if err != nil || len(got) != 3 {
		t.Fatalf("%d lines, %v", len(got), err)
	}
	for _, l := range got {
		if l.err == nil || !strings.Contains(l.err.Error(), "is the file UTF-16? save it as UTF-8") {
			t.Errorf("line %d: %v", l.n, l.err)
		}
	}
}
