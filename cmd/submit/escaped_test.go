package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEscapedJobMeasuredAsPublished: a --job file or batch line written
// with \uXXXX escapes (Python's json.dumps writes every non-ASCII
// character so, jq --ascii-output too) was measured as written: a job of
// 2 KB as published, 6 KB as written, was refused as "job too large: 6016
// bytes, limit 4096" though the worker takes it. The limit is the job's
// as published; one over it as published is still refused, with that
// size.
func TestEscapedJobMeasuredAsPublished(t *testing.T) {
	startWorker(t) // jobs up to 4096 bytes
	dir := t.TempDir()
	fits := `{"task":"echo:` + strings.Repeat(`\u00e9`, 1000) + `"}`     // 6016 bytes; about 2 KB as published
	tooLarge := `{"task":"echo:` + strings.Repeat(`\u00e9`, 2100) + `"}` // 4268 bytes as published, with an id and queue
	for _, tc := range []struct {
		name, job string
		code      int
		want      string // the --job's answer, or its error
	}{
		{"fits", fits, 0, strings.Repeat("é", 1000)},
		{"too large as published", tooLarge, exitFailed, "job too large: 4268 bytes, limit 4096 (the size is the job as published"},
		// Over six times the limit as written: refused as written, naming
		// the limit set (it said "limit 24576", six times it).
		{"too large as written", `{"task":"echo:` + strings.Repeat("a", 6*4096) + `"}`, exitFailed,
			"job too large: 24592 bytes as written, over six times the limit of 4096 bytes as published (JETAGENT_MAX_JOB_BYTES"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			if err := os.WriteFile(job, []byte(tc.job), 0o600); err != nil {
				t.Fatal(err)
			}
			res := submitCmd(t, "", "--job", job)
			if res.code != tc.code || !strings.Contains(res.stdout+res.stderr, tc.want) {
				t.Errorf("--job: want exit %d and %.60q\ngot %d, %.100q, %.300q", tc.code, tc.want, res.code, res.stdout, res.stderr)
			}
			batch := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".jsonl")
			if err := os.WriteFile(batch, []byte(tc.job+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "out.jsonl")
			res = submitCmd(t, "", "--file", batch, "--out", out)
			got, _ := os.ReadFile(out)
			if res.code != tc.code || !strings.Contains(string(got), strings.TrimPrefix(tc.want, "é")) {
				t.Errorf("batch: want exit %d and %.60q\ngot %d, %.300q, %.300q", tc.code, tc.want, res.code, res.stderr, got)
			}
		})
	}
}
