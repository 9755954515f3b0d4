package bench

import (
	"fmt"
	"math"

	"github.com/prometheus/client_golang/prometheus"
)

// DelayHist is a child player's delivery_delay_seconds histogram (dispatch of an entry to
// its write on a target's stream, summed over its streams): the player's own share of the
// lag, without the receivers' and the producer's.
type DelayHist struct {
	Bounds []float64 // upper bounds of the buckets, seconds (finite: JSON has no +Inf)
	Counts []uint64  // cumulative counts, one per bound and the total last
}

// delayHist reads the histogram from a registry.
func delayHist(g prometheus.Gatherer) (DelayHist, error) {
	mfs, err := g.Gather()
	if err != nil {
		return DelayHist{}, err
	}
	var h DelayHist
	for _, mf := range mfs {
		if mf.GetName() != "statecast_player_delivery_delay_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			ph := m.GetHistogram()
			if h.Bounds == nil {
				for _, b := range ph.GetBucket() {
					h.Bounds = append(h.Bounds, b.GetUpperBound())
				}
				h.Counts = make([]uint64, len(h.Bounds)+1)
			}
			for i, b := range ph.GetBucket() {
				h.Counts[i] += b.GetCumulativeCount()
			}
			h.Counts[len(h.Counts)-1] += ph.GetSampleCount()
		}
	}
	return h, nil
}

// Since returns the observations made after o (an earlier reading of the same histogram).
func (h DelayHist) Since(o DelayHist) DelayHist {
	d := DelayHist{Bounds: h.Bounds, Counts: make([]uint64, len(h.Counts))}
	for i := range h.Counts {
		d.Counts[i] = h.Counts[i]
		if i < len(o.Counts) {
			d.Counts[i] -= o.Counts[i]
		}
	}
	return d
}

// Quantile returns the bounds (lo, hi] of the bucket that holds the q-quantile, seconds.
func (h DelayHist) Quantile(q float64) (lo, hi float64) {
	n := len(h.Counts)
	if n == 0 || h.Counts[n-1] == 0 {
		return 0, 0
	}
	rank := uint64(math.Ceil(q * float64(h.Counts[n-1])))
	for i, c := range h.Counts[:n-1] {
		if c >= rank {
			if i > 0 {
				lo = h.Bounds[i-1]
			}
			return lo, h.Bounds[i]
		}
	}
	return h.Bounds[n-2], math.Inf(1)
}

// String gives p50 and p99 as bucket ranges in milliseconds.
func (h DelayHist) String() string {
	n := uint64(0)
	if len(h.Counts) > 0 {
		n = h.Counts[len(h.Counts)-1]
	}
	l50, h50 := h.Quantile(0.5)
	l99, h99 := h.Quantile(0.99)
	return fmt.Sprintf("p50 in (%.1f, %.1f] ms, p99 in (%.1f, %.1f] ms (n=%d)", l50*1e3, h50*1e3, l99*1e3, h99*1e3, n)
}
