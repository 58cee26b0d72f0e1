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

// TestTimeoutFlagWithoutEffect: --timeout 0s and a --timeout longer than a
// duration can be were submitted, and the worker ran the job with its own
// default timeout instead (a note in the started event): refused before
// anything connects, as --max-rounds 0 is. A job file's timeout is the
// worker's to note, as documented.
func TestTimeoutFlagWithoutEffect(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--timeout", "0s", "echo:x"}, "--timeout must be positive (got 0s); leave it out for the worker's default"},
		{[]string{"--timeout", "0", "echo:x"}, "--timeout must be positive (got 0)"},
		{[]string{"--timeout", "0.4ns", "echo:x"}, "--timeout must be positive (got 0.4ns)"},
		{[]string{"--timeout", "-1s", "echo:x"}, "--timeout must be positive (got -1s)"},
		{[]string{"--file", "tasks.jsonl", "--timeout", "0ms"}, "--timeout must be positive (got 0ms)"},
		{[]string{"--timeout", "2562048h", "echo:x"},
			"--timeout 2562048h is longer than a duration can be (at most 2562047h0m0s); leave it out for the worker's default"},
		// Refused by the job schema's pattern, exit 1, naming '/timeout'
		// rather than the flag and the missing unit.
		{[]string{"--timeout", "5", "echo:x"}, `--timeout "5" is not a duration: give a number with a unit (ns, us, ms, s, m, h)`},
		{[]string{"--timeout", "5 m", "echo:x"}, `--timeout "5 m" is not a duration`},
		{[]string{"--file", "tasks.jsonl", "--timeout", "+5s"}, `--timeout "+5s" is not a duration`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			res := runQuiet(tc.args...)
			if res.code != exitUsage || !strings.Contains(res.stderr, tc.want) || res.stdout != "" {
				t.Errorf("want exit 2 and %q\ngot %+v", tc.want, res)
			}
		})
	}
}
