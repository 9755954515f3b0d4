package saramapc

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// sarama's metrics registry starts one process-wide meter ticker that never stops.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
		// A producer that failed to send opens a circuit breaker whose timer goroutine
		// sleeps out its 10s after the producer closed (TestDeadLetterTopicUnwritable).
		goleak.IgnoreAnyFunction("github.com/eapache/go-resiliency/breaker.(*Breaker).timer"),
	)
}
