package main

import (
	"errors"
	"flag"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestParseArgs: a task given as a word (not with --task) ran the default
// task instead, and an empty --task started a worker for submit to refuse.
func TestParseArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		task    string
		keep    bool
		wantErr string
	}{
		{nil, defaultTask, false, ""},
		{[]string{"--task", "hello", "--keep"}, "hello", true, ""},
		{[]string{"--task", "-v looks like a flag"}, "-v looks like a flag", false, ""},
		{[]string{"What is 2+2?"}, "", false, `unexpected argument "What is 2+2?": give the task with --task`},
		{[]string{"--keep", "two", "words"}, "", false, `--task "two words"`},
		{[]string{"--task", ""}, "", false, "--task is empty"},
		{[]string{"--task", "  "}, "", false, "--task is empty"},
		{[]string{"--tsak", "x"}, "", false, "flag provided but not defined: -tsak"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			task, keep, err := parseArgs(tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %q, %v, err %v; want an error with %q", task, keep, err, tc.wantErr)
				}
				return
			}
			if err != nil || task != tc.task || keep != tc.keep {
				t.Fatalf("got %q, %v, err %v; want %q, %v", task, keep, err, tc.task, tc.keep)
			}
		})
	}
	if _, _, err := parseArgs([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
}

// A line longer than the scanner takes stopped the reading of the child's
// output: the child then blocked on a full pipe, and Wait, which waits for
// os/exec's copy of its output, never returned.
func TestStartPrefixedLongLine(t *testing.T) {
	cmd := exec.Command("sh", "-c", `head -c 2000000 /dev/zero | tr '\000' x; echo; echo after`)
	if _, err := startPrefixed(cmd, "[test] ", "never printed"); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the child did not exit within 30s: its output, past a 2 MB line, was not read")
	}
}
