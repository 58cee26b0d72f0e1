package codemode

import (
	"math"
	"time"

	"github.com/dlclark/regexp2/v2"
)

// regexpMatchBound bounds one regular-expression match in the sandbox: the
// default wall time of a whole execution (DefaultLimits.WallTime).
const regexpMatchBound = 30 * time.Second

// goja matches regular expressions with regexp2, which does not look at
// the runtime's interrupt while it backtracks: code such as
// /(a+)+$/.test("aaaa…!") ran past its wall time and, once Run had
// abandoned it, kept a CPU for ever (2^n steps), one more per such
// execution — a worker could be starved by a job's code. regexp2's only
// bound is a process-wide default that each expression takes when it is
// compiled, so it is set here, once, before any code runs, unless the
// program chose one. A match that reaches it counts as no match (goja's
// handling); at the default limits the execution has ended by then.
// The tokenizer's expressions (tiktoken-go, also regexp2) get the bound
// too; a tokenizer match takes microseconds.
func init() {
	if regexp2.DefaultMatchTimeout == time.Duration(math.MaxInt64) {
		regexp2.DefaultMatchTimeout = regexpMatchBound
	}
}
