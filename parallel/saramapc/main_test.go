package saramapc

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// sarama's metrics registry starts one process-wide meter ticker that never stops.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"))
}
