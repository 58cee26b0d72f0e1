package main

import (
	"strings"
	"testing"
)

// TestJobFromStdin: --file - reads a batch from stdin, but --job - was
// refused with "open -: no such file or directory", so a job piped from
// jq (the README's dead-letter recipe, or another program) needed a file.
// --job - now reads the job from stdin, checked like a file's; with
// --file - as well it is refused, both reading stdin.
func TestJobFromStdin(t *testing.T) {
	startWorker(t)
	for _, tt := range []struct {
		name, stdin string
		args        []string
		code        int
		out, stderr string
	}{
		{"a job", `{"id":"from-stdin","task":"echo:piped"}`, []string{"--job", "-"}, 0, "piped\n", ""},
		{"flags over it", `{"task":"echo:piped"}`, []string{"--job", "-", "--id", "from-stdin-2", "--detach"}, 0, "from-stdin-2\n", ""},
		{"checked as a file's", `{"task":"echo:x","bogus":1}`, []string{"--job", "-"}, 1, "",
			"submit: --job -: job fails schemas/job.schema.json: at '': additional properties 'bogus' not allowed"},
		{"with --file -", `"echo:x"`, []string{"--job", "-", "--file", "-"}, 2, "",
			"--job - and --file - both read stdin: give one of them a file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := submitCmd(t, tt.stdin, tt.args...)
			if res.code != tt.code || res.stdout != tt.out || !strings.Contains(res.stderr, tt.stderr) {
				t.Errorf("want exit %d, stdout %q, stderr with %q; got %+v", tt.code, tt.out, tt.stderr, res)
			}
		})
	}
}
