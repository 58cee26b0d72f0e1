package toolcache

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestLeftOutWarningBounded: the "MCP tool definitions left out" warning
// held every definition left out, whole: a list of many bad tools, or of
// names of kilobytes, made one log line as large as the list (up to its
// 64 MiB). It now names the first leftOutShown, each cut, and counts the
// rest; the same list again is not logged again.
func TestLeftOutWarningBounded(t *testing.T) {
	t.Parallel()
	var skipped []error
	for i := range 1000 {
		skipped = append(skipped, fmt.Errorf("tools[%d]: tool %q: without a valid name", i, strings.Repeat("n", 10<<10)))
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	c := &serverConn{}
	c.warnLeftOut(log, skipped)
	c.warnLeftOut(log, skipped)
	got := buf.String()
	if n := strings.Count(got, "MCP tool definitions left out"); n != 1 {
		t.Errorf("%d warnings, want 1", n)
	}
	if len(got) > 2*leftOutShown*leftOutEach || !strings.Contains(got, "(and 980 more)") || !strings.Contains(got, "count=1000") ||
		!strings.Contains(got, "tools[19]") || strings.Contains(got, "tools[20]") {
		t.Errorf("warning of %d bytes: %.600s", len(got), got)
	}
}
