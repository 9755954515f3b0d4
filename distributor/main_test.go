package distributor

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// envHelperConfig makes the test binary run as a distributor subprocess (see
// TestStandbyTakeoverKill): it runs the config in that file until it is killed.
const envHelperConfig = "DIST_HELPER_CONFIG"

func TestMain(m *testing.M) {
	if path := os.Getenv(envHelperConfig); path != "" {
		cfg, err := LoadConfig(path)
		if err == nil {
			var d *Distributor
			if d, err = New(*cfg); err == nil {
				err = d.Run(context.Background())
			}
		}
		fmt.Fprintln(os.Stderr, "helper distributor:", err)
		os.Exit(3)
	}
	goleak.VerifyTestMain(m,
		// sarama's go-metrics meter ticker is process-global and never stops.
		goleak.IgnoreTopFunction("github.com/rcrowley/go-metrics.(*meterArbiter).tick"),
	)
}
