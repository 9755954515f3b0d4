package player

import (
	"testing"

	"go.uber.org/goleak"
)

// sarama starts go-metrics' process-wide meter goroutine on first use; it is not ours.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}
