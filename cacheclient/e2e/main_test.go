// Package e2e tests cacheclient against the real player, a real Kafka broker and (when the
// distributor is available) a real PostgreSQL, as started by deploy/local.
package e2e

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// sarama's and the player's background goroutines that outlive Close briefly.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
		goleak.IgnoreAnyFunction("github.com/IBM/sarama.(*Broker).responseReceiver"),
	)
}
