package toolcache

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A stdio server whose cwd is missing, or is no directory, failed with
// the error of its command ("fork/exec /bin/sh: no such file or
// directory"): the chdir in the child is reported as the exec's. The error
// names the cwd; a command that is missing is still named as such.
func TestStartErrorNamesTheCwd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	writeFile(t, file, "")
	s := DefaultSettings()
	s.HealthInterval, s.BackoffInitial, s.BackoffMax = 0, time.Hour, time.Hour
	p := newTestPool(t, Config{Servers: map[string]ServerConfig{
		"missing": {Command: "/bin/sh", Cwd: filepath.Join(dir, "nope")},
		"file":    {Command: "/bin/sh", Cwd: file},
		"command": {Command: filepath.Join(dir, "no-such-server"), Cwd: dir},
	}}, WithSettings(s))
	want := map[string]string{
		"missing": `its cwd: stat ` + filepath.Join(dir, "nope") + `: no such file or directory`,
		"file":    `its cwd "` + file + `" is not a directory`,
		"command": `fork/exec ` + filepath.Join(dir, "no-such-server") + `: no such file or directory`,
	}
	for _, st := range p.Status() {
		if st.State != StateFailed || !strings.Contains(st.Error, want[st.Name]) {
			t.Errorf("%s: %s %q, want failed with %q", st.Name, st.State, st.Error, want[st.Name])
		}
		if st.Name != "command" && strings.Contains(st.Error, "/bin/sh: no such file") {
			t.Errorf("%s: %q blames the command", st.Name, st.Error)
		}
	}
}
