package parallel

import (
	"sync/atomic"
	"time"
)

// calibrated wraps a sleep so that it takes its nominal duration on average: it asks for
// d − est, where est is a moving average (1/16 weight) of how much the wrapped sleep has been
// overshooting (wake-up latency, CPU contention of this shared machine), clamped to
// [0, 1 ms]. A request shorter than est sleeps 0. Whether it works is not assumed: the seed
// table prints the bound from the realised durations and realised/nominal work beside it.
func calibrated(sleep func(time.Duration)) func(time.Duration) {
	var est atomic.Int64 // ns
	return func(d time.Duration) {
		e := time.Duration(est.Load())
		ask := max(d-e, 0)
		t0 := time.Now()
		sleep(ask)
		lat := int64(time.Since(t0) - ask)
		lat = min(max(lat, 0), int64(time.Millisecond))
		for {
			old := est.Load()
			if est.CompareAndSwap(old, old+(lat-old)/16) {
				return
			}
		}
	}
}
