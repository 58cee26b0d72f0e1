package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJobFileReadAsTheWorkerReadsIt: a --job file or batch line the worker
// would run is submitted. Two were refused: a max_rounds written 1.0 or
// 1e1 (the schema's integer; the worker reads it through json.Number) with
// Go's "json: cannot unmarshal number 1.0 into Go struct field
// Job.max_rounds of type int", and a job holding '<', '>' or '&' (HTML,
// code) well under the limit as "job too large", measured with each such
// character escaped to six bytes (seen end to end: a 20 KB file of '<'
// refused as 120042 bytes, limit 61440).
func TestJobFileReadAsTheWorkerReadsIt(t *testing.T) {
	startWorker(t) // jobs up to 4096 bytes
	dir := t.TempDir()
	lt := strings.Repeat("<", 3000) // 3000 bytes; 18000 escaped
	tests := []struct {
		name string
		file string // the --job file and the batch line
		args []string
		want string // the answer
	}{
		{"max_rounds 1.0", `{"task":"echo:one","max_rounds":1.0}`, nil, "one"},
		{"max_rounds 1e1", `{"task":"echo:ten","max_rounds":1e1}`, nil, "ten"},
		{"task of angle brackets", `{"task":"echo:` + lt + `"}`, nil, lt},
		{"system of ampersands, task on the command line", `{"system":"` + strings.Repeat("&", 3000) + `"}`,
			[]string{"echo:amp"}, "amp"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".json")
			if err := os.WriteFile(job, []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"--job", job}, tt.args...)
			if res := submitCmd(t, "", args...); res.code != 0 || res.stdout != tt.want+"\n" {
				t.Errorf("--job: want exit 0 and %.40q\ngot %d, %.200q, %.300q", tt.want, res.code, res.stdout, res.stderr)
			}
			if tt.args != nil {
				return // a batch line has its task
			}
			batch := filepath.Join(dir, "batch.jsonl")
			if err := os.WriteFile(batch, []byte(tt.file+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "out.jsonl")
			res := submitCmd(t, "", "--file", batch, "--out", out)
			got, _ := os.ReadFile(out)
			if res.code != 0 || !strings.Contains(string(got), `"status":"succeeded"`) {
				t.Errorf("batch %d: want the line to succeed\ngot %d, %.300q, %.300q", i, res.code, res.stderr, got)
			}
		})
	}
}
