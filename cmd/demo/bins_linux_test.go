//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// built holds the binaries the tests run, built once per test run.
var built struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// demoBinaries returns a directory of the test's own holding the demo,
// worker, submit and example MCP server binaries (links to the ones
// built once per test run), so that what runs from it is the test's.
func demoBinaries(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "jetagent-demo-test-bin")
		if err != nil {
			built.err = err
			return
		}
		built.dir = dir
		if out, err := exec.Command("go", "build", "-o", dir+"/", ".", "../worker", "../submit", "../../examples/mcpserver").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("build: %w\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	bin := t.TempDir()
	for _, b := range []string{"demo", "worker", "submit", "mcpserver"} {
		if err := os.Link(filepath.Join(built.dir, b), filepath.Join(bin, b)); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}
