package telemetry_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/jetagent/jetagent/internal/natstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, natstest.GoleakOptions()...)
}
