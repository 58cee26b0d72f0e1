package codemode

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// outBuf collects what console prints, keeping at most max bytes.
type outBuf struct {
	max     int
	buf     []byte // the lines kept, each ending in '\n'
	full    bool   // nothing more is kept
	dropped int    // lines not kept, or kept in part
	partial bool   // the last line kept is kept in part (counted in dropped)
}

var levelPrefix = [...]string{"", "[warn] ", "[error] "}

func (o *outBuf) add(level int, text string) {
	if o.full {
		o.dropped++
		return
	}
	if level > 0 && level < len(levelPrefix) {
		text = levelPrefix[level] + text
	}
	room := o.max - len(o.buf)
	if len(text)+1 <= room {
		o.buf = append(o.buf, text...)
		o.buf = append(o.buf, '\n')
		if len(o.buf) >= o.max {
			o.full = true
		}
		return
	}
	if len(text) == room {
		// The line fits whole, without its newline: it is the last one
		// kept, and was counted as cut (a line of exactly the limit came
		// back as a marker).
		o.buf = append(o.buf, text...)
		o.full = true
		return
	}
	o.buf = append(o.buf, text[:runeCut(text, room)]...)
	o.full = true
	o.partial = true
	o.dropped++
}

// shortMark ends an output cut at a limit too small for the markers that
// say what was cut.
const shortMark = "[output truncated]"

// assemble is Output.Text: the console lines, then the final value. When
// both do not fit in max bytes, the value keeps up to half of them (more
// when the console output is shorter), and each cut part ends in a marker.
// At a limit too small for those markers (they are up to about 160
// bytes), the start of it all and one short marker, or the marker's start
// alone: the result is never over max bytes.
func (o *outBuf) assemble(value string, hasValue bool) string {
	s := o.marked(value, hasValue)
	if len(s) <= o.max {
		return s
	}
	all := string(o.buf)
	if hasValue {
		all += value
	}
	keep := o.max - len(shortMark) - 1
	if keep <= 0 {
		return shortMark[:min(len(shortMark), max(o.max, 0))]
	}
	return all[:runeCut(all, keep)] + "\n" + shortMark
}

// marked is assemble with the markers that say what was cut.
func (o *outBuf) marked(value string, hasValue bool) string {
	logs := string(o.buf)
	if n := len(logs); n > 0 && logs[n-1] == '\n' {
		logs = logs[:n-1]
	}
	cut := o.dropped > 0
	if !hasValue {
		return o.cutLogs(logs, o.max)
	}
	sep := 0
	if logs != "" {
		sep = 1
	}
	if !cut && len(logs)+sep+len(value) <= o.max {
		if logs == "" {
			return value
		}
		return logs + "\n" + value
	}
	if logs == "" && !cut {
		return cutValue(value, o.max)
	}
	valueShare := min(len(value), o.max/2)
	logBudget := o.max - valueShare - 1
	logPart := o.cutLogs(logs, logBudget)
	return logPart + "\n" + cutValue(value, o.max-len(logPart)-1)
}

// cutLogs fits the console lines in budget bytes, marker included.
func (o *outBuf) cutLogs(logs string, budget int) string {
	if o.dropped == 0 && len(logs) <= budget {
		return logs
	}
	mark := func(kept int) string {
		// The lines not shown or cut: those not kept, the kept ones
		// ending after kept, and the last one (logs has no final
		// newline) when it is cut here and not counted already.
		n := o.dropped + strings.Count(logs[kept:], "\n")
		if kept < len(logs) && !o.partial {
			n++
		}
		return fmt.Sprintf("[output truncated: %d console lines not shown or cut; the output limit is %d bytes]", n, o.max)
	}
	keep := runeCut(logs, budget-len(mark(0))-1)
	if keep <= 0 {
		return mark(0)
	}
	return logs[:keep] + "\n" + mark(keep)
}

func cutValue(v string, budget int) string {
	if len(v) <= budget {
		return v
	}
	marker := fmt.Sprintf("[output truncated: the final value is %d bytes, only the start is shown]", len(v))
	keep := budget - len(marker) - 1
	if keep <= 0 {
		return marker
	}
	return v[:runeCut(v, keep)] + "\n" + marker
}

// runeCut is the largest n <= max such that s[:n] ends on a rune boundary.
func runeCut(s string, max int) int {
	if max >= len(s) {
		return len(s)
	}
	if max < 0 {
		return 0
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return max
}
