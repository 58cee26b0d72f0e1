package agentloop_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// regexp2's clock, which codemode's match bound starts, stops by
	// itself a second after the last match's deadline (30 s on).
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/dlclark/regexp2/v2.runClock"))
}
