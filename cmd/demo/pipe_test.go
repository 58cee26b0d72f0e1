//go:build linux

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A demo whose stdout is closed (bin/demo | head) died of SIGPIPE at its
// next write, before its cleanup: its worker and the example MCP server
// kept running and its temporary directory stayed. It now stops, stops
// the worker (which stops the MCP server) and removes the directory.
func TestClosedStdoutStillCleansUp(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// running: stdout is closed while the worker and the MCP server
		// run, once the demo has printed the worker's command line; else
		// at once, before the demo has printed anything.
		running bool
	}{
		{"before the worker started", false},
		{"with the worker and the MCP server running", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The binaries in a directory of this subtest's own, so that
			// what is left running is counted by it.
			bin := demoBinaries(t)
			release := func() {}
			if tc.running {
				// The MCP server waits for the test's word: the worker is
				// not ready, so the demo prints nothing more, until the
				// test has closed its stdout.
				fifo := filepath.Join(bin, "go-ahead")
				if err := syscall.Mkfifo(fifo, 0o600); err != nil {
					t.Fatal(err)
				}
				real := filepath.Join(bin, "mcpserver.real")
				if err := os.Rename(filepath.Join(bin, "mcpserver"), real); err != nil {
					t.Fatal(err)
				}
				script := fmt.Sprintf("#!/bin/sh\nread _ < %s\nexec %s\n", fifo, real)
				if err := os.WriteFile(filepath.Join(bin, "mcpserver"), []byte(script), 0o700); err != nil {
					t.Fatal(err)
				}
				release = func() {
					// Read-write, so the open does not wait for the reader;
					// kept open until the test ends, so the line waits in
					// the FIFO for the server to read it.
					f, err := os.OpenFile(fifo, os.O_RDWR, 0)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = f.Close() })
					if _, err := f.WriteString("go\n"); err != nil {
						t.Fatal(err)
					}
				}
			}
			tmp := t.TempDir() // the demo's TMPDIR: its temporary directory goes here
			demo := exec.Command(filepath.Join(bin, "demo"))
			demo.Env = append(withoutVar(os.Environ(), "OPENAI_BASE_URL"), "TMPDIR="+tmp)
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close() //nolint:errcheck // closed below; again on a failure
			demo.Stdout = pw
			stderr, err := demo.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := demo.Start(); err != nil {
				t.Fatal(err)
			}
			_ = pw.Close()
			logged := make(chan string, 1)
			go func() {
				var b strings.Builder
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					b.WriteString(sc.Text() + "\n")
				}
				logged <- b.String()
			}()
			exited := make(chan error, 1)
			go func() {
				if tc.running {
					sc := bufio.NewScanner(pr)
					for sc.Scan() && !strings.HasSuffix(sc.Text(), " bin/worker") {
					}
				}
				_ = pr.Close()
				release()
				out := <-logged // Wait closes the stderr pipe: read it first
				err := demo.Wait()
				logged <- out
				exited <- err
			}()
			select {
			case err = <-exited:
			case <-time.After(60 * time.Second):
				_ = demo.Process.Kill()
				t.Fatal("the demo did not exit within 60s")
			}
			out := <-logged
			if err == nil || !strings.Contains(out, "demo: stdout was closed; stopped the worker") {
				t.Errorf("exit %v; stderr:\n%s", err, out)
			}
			if tc.running && !strings.Contains(out, "[worker] ") {
				t.Errorf("the worker did not start; stderr:\n%s", out)
			}
			if left, _ := filepath.Glob(filepath.Join(tmp, "jetagent-demo-*")); len(left) > 0 {
				t.Errorf("temporary directory left: %v", left)
			}
			if left := processesOf(t, bin); len(left) > 0 {
				t.Errorf("processes left running: %v", left)
				for _, p := range left {
					var pid int
					if _, err := fmt.Sscanf(p, "/proc/%d", &pid); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL) // ours: started by this test's demo
					}
				}
			}
		})
	}
}

// withoutVar is environ without key.
func withoutVar(environ []string, key string) []string {
	var out []string
	for _, kv := range environ {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// processesOf lists the running processes whose executable is in dir.
func processesOf(t *testing.T, dir string) []string {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/exe")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, p := range procs {
		if exe, err := os.Readlink(p); err == nil && strings.HasPrefix(exe, dir+string(filepath.Separator)) {
			found = append(found, filepath.Dir(p)+" "+exe)
		}
	}
	return found
}
