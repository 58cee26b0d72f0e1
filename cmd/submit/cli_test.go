package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/jetagent/jetagent/internal/jobs"
)

// runQuiet runs the command with no stdin and no server, for what submit
// decides before it connects (help, usage errors).
func runQuiet(args ...string) result {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// TestHelpFromFlags: the help lists every flag as defined (with its value
// name and default), every command, and the environment, however it is
// asked for; a command's own help lists its flags.
func TestHelpFromFlags(t *testing.T) {
	t.Parallel()
	cmds := (&cli{}).commands()
	var every []string
	for _, k := range cmds {
		k.flags.VisitAll(func(f *pflag.Flag) {
			name, _ := pflag.UnquoteUsage(f)
			every = append(every, strings.TrimSpace("--"+f.Name+" "+name))
		})
		if k.name != "" {
			every = append(every, "submit "+k.name+" ")
		}
	}
	every = append(every, "NATS_URL", "JETAGENT_PREFIX", "Exit status", `(default "default")`, "(default 8)",
		"--meta k=v", "--servers a,b", "-- status")

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, every},
		{[]string{"-h"}, every},
		{[]string{"-help"}, every},
		{[]string{"help"}, every},
		{[]string{"echo:x", "--detach", "--help"}, every},
		{[]string{"status", "--help"}, []string{"submit status [flags] ID: the job's state", "--json", "submit --help lists"}},
		{[]string{"help", "transcript"}, []string{"submit transcript [flags] ID", "--json", "--raw", "what the model saw"}},
		{[]string{"cancel", "some-id", "-h"}, []string{"submit cancel [flags] ID", "--json"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			res := runQuiet(tc.args...)
			if res.code != exitOK || res.stderr != "" {
				t.Fatalf("%+v", res)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.stdout, w) {
					t.Errorf("help lacks %q:\n%s", w, res.stdout)
				}
			}
		})
	}
}

// TestHelpOfNoCommand: help for a command that does not exist says so
// (with the one meant) instead of printing the whole help, exit 0.
func TestHelpOfNoCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"help", "stauts"}, exitUsage, `submit: help: no command "stauts": did you mean submit help status?`},
		{[]string{"help", "wach"}, exitUsage, "did you mean submit help watch?"},
		{[]string{"help", "bogus"}, exitUsage, `no command "bogus" (commands: status, watch, transcript, cancel; see submit --help)`},
		{[]string{"help", "submit"}, exitOK, ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			res := runQuiet(tc.args...)
			if res.code != tc.code || !strings.Contains(res.stderr, tc.want) || (tc.code == exitOK) != (res.stdout != "") {
				t.Errorf("want exit %d and %q\ngot %+v", tc.code, tc.want, res)
			}
		})
	}
}

// TestReadmeAgreesWithHelp: every flag and command README.md's examples
// ("Using it") show is one the help lists.
func TestReadmeAgreesWithHelp(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	help := runQuiet("--help").stdout
	flagRE := regexp.MustCompile(`--[a-z][a-z-]*`)
	var lines int
	for _, l := range strings.Split(string(b), "\n") {
		cmdline, ok := strings.CutPrefix(l, "bin/submit ") // the command lines of the examples
		if !ok {
			continue
		}
		lines++
		cmdline, _, _ = strings.Cut(cmdline, "#")
		for _, f := range flagRE.FindAllString(cmdline, -1) {
			if !strings.Contains(help, "      "+f+" ") && !strings.Contains(help, "      "+f+"[") {
				t.Errorf("README's %q: the help does not list %s", l, f)
			}
		}
		if w := strings.Fields(cmdline); len(w) > 1 && w[1] == "ID" && !strings.Contains(help, "submit "+w[0]+" ID") {
			t.Errorf("README's %q: the help does not list submit %s", l, w[0])
		}
	}
	if lines < 5 {
		t.Errorf("found %d bin/submit lines in README.md", lines)
	}
}

// TestFlagErrors: a bad command line exits 2 with its reason said once,
// before anything connects; a long flag with one dash says how to write it.
func TestFlagErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
		once string // said exactly once
	}{
		{[]string{"--bogus", "echo:x"}, "unknown flag: --bogus", "-bogus"},
		{[]string{"status", "--bogus", "x"}, "unknown flag: --bogus", "-bogus"},
		{[]string{"-detach", "echo:x"}, "a long flag takes two dashes: --detach", "two dashes"},
		{[]string{"transcript", "x", "-raw"}, "a long flag takes two dashes: --raw", "two dashes"},
		{[]string{"echo:x", "-id=x"}, "a long flag takes two dashes: --id", "--id"},
		{[]string{"--max-rounds", "five", "echo:x"}, `invalid argument "five" for "--max-rounds"`, "max-rounds"},
		{[]string{"echo:x", "--queue"}, "flag needs an argument: --queue", "--queue"},
		{[]string{"--file", "tasks.jsonl", "status"}, "--file and a task argument are exclusive", "exclusive"},
		{[]string{"--file", "tasks.jsonl", "--id", "x"}, `--id does not apply to a batch: give each line its own "id"`, "--id"},
		{[]string{"--file", "tasks.jsonl", "--local-mcp", "m.json"}, "--local-mcp does not apply to a batch", "--local-mcp"},
		{[]string{"--meta", "novalue", "echo:x"}, `--meta "novalue": want key=value`, "novalue"},
		{[]string{"--meta", "k=a", "--meta", "k=b", "echo:x"}, `--meta "k=b": key "k" is given twice ("a" and "b"): give it once`, "twice"},
		// Batch flags without --file were ignored; 0 rounds was left out of
		// the job; a bad glob failed the job on the worker.
		{[]string{"--out", "r.jsonl", "echo:x"}, "--out applies to a batch: give --file FILE", "--file"},
		{[]string{"echo:x", "--parallel", "3"}, "--parallel applies to a batch: give --file FILE", "--file"},
		{[]string{"--max-rounds", "0", "echo:x"}, "--max-rounds must be at least 1 (got 0)", "max-rounds"},
		{[]string{"--file", "tasks.jsonl", "--max-rounds", "-1"}, "--max-rounds must be at least 1 (got -1)", "max-rounds"},
		{[]string{"--allow", "read_*,[", "echo:x"}, `--allow "read_*,[": bad glob "[": syntax error in pattern`, "--allow"},
		{[]string{"--deny", `a\`, "echo:x"}, `bad glob "a\\": syntax error in pattern`, "--deny"},
		// An empty allow list is no filter: the job was offered every tool.
		{[]string{"--allow", "", "echo:x"}, `--allow "" names no tool, which would allow every tool`, "names no tool"},
		{[]string{"--allow", " , ", "echo:x"}, `--allow " , " names no tool`, "names no tool"},
		{[]string{"watch"}, "watch takes one job id", "watch"},
		{[]string{"cancel", "a", "b"}, "cancel takes one job id", "cancel"},
		// An empty value was left out of the job: the worker's default ran.
		{[]string{"--queue", "", "echo:x"}, `--queue is empty: the job would go to the queue "default"`, "is empty"},
		{[]string{"--model=", "echo:x"}, "--model is empty: the job would run with the worker's model", "is empty"},
		{[]string{"--system", "", "echo:x"}, "--system is empty: the job would run with the worker's system prompt", "is empty"},
		{[]string{"--mode", "", "echo:x"}, "--mode is empty", "is empty"},
		{[]string{"--timeout", "", "echo:x"}, "--timeout is empty: the job would run with the worker's timeout", "is empty"},
		{[]string{"--file", "tasks.jsonl", "--queue", ""}, "--queue is empty", "is empty"},
		// A command given as a flag, or another command's flag, was refused
		// as an unknown flag only.
		{[]string{"--watch", "job-1"}, "unknown flag: --watch: watch is a command, given first: submit watch ID", "is a command"},
		{[]string{"--cancel=job-1"}, "cancel is a command, given first: submit cancel ID", "is a command"},
		{[]string{"--wait", "job-1"}, "unknown flag: --wait: --wait is a flag of watch: submit watch --wait ...", "flag of"},
		{[]string{"status", "--raw", "job-1"}, "--raw is a flag of transcript: submit transcript --raw ...", "flag of"},
		{[]string{"transcript", "--wait", "job-1"}, "--wait is a flag of watch", "flag of"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			res := runQuiet(tc.args...)
			if res.code != exitUsage || !strings.Contains(res.stderr, tc.want) || strings.Count(res.stderr, tc.once) != 1 ||
				!strings.HasSuffix(res.stderr, " (see submit --help)\n") || res.stdout != "" {
				t.Errorf("want exit 2 and %q once\ngot %+v", tc.want, res)
			}
		})
	}
}

// TestBatchOutcomesByError: the progress counts a line as interrupted by
// the error it carries, not by its text: a job's own error reading the
// same is the job's failure.
func TestBatchOutcomesByError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name            string
		err             error
		text            string
		goesOn, notSent int
		summed          bool
	}{
		{name: "not submitted", err: errNotSubmitted, text: errNotSubmitted.Error(), notSent: 1, summed: true},
		{name: "stopped waiting", err: fmt.Errorf("%w (submit watch j)", errStoppedWaiting), text: "…", goesOn: 1, summed: true},
		{name: "a line's own error", err: errors.New("want a JSON object"), text: "want a JSON object"},
		{name: "a job's error in the same words", text: errNotSubmitted.Error()},
		{name: "a job's error in the other words", text: errStoppedWaiting.Error() + " (submit watch j)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var w bytes.Buffer
			p := newProgress(&w, 1, false, false)
			p.done(batchResult{Line: 1, err: tc.err, Result: &jobs.Result{ID: "j", Status: jobs.StatusFailed, Error: tc.text}})
			p.finish()
			if p.goesOn != tc.goesOn || p.notSent != tc.notSent || strings.Contains(w.String(), "still going on (submit watch ID)") != tc.summed {
				t.Errorf("goes on %d, not sent %d:\n%s", p.goesOn, p.notSent, w.String())
			}
		})
	}
}
