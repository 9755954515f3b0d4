package bench

import (
	"math"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Histogram is a Prometheus histogram read back: sample count, mean, and quantiles
// interpolated linearly within buckets (as histogram_quantile does).
type Histogram struct {
	Count          uint64
	Mean, P50, P99 time.Duration
}

// HistogramOf gathers the histogram name (in seconds) from g, summed over its label sets.
// A histogram that is missing or empty gives the zero Histogram.
func HistogramOf(g prometheus.Gatherer, name string) Histogram {
	mfs, err := g.Gather()
	if err != nil {
		return Histogram{}
	}
	var h Histogram
	var sum float64
	bounds := map[float64]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			hh := m.GetHistogram()
			h.Count += hh.GetSampleCount()
			sum += hh.GetSampleSum()
			for _, b := range hh.GetBucket() {
				bounds[b.GetUpperBound()] += b.GetCumulativeCount()
			}
		}
	}
	if h.Count == 0 {
		return h
	}
	h.Mean = time.Duration(sum / float64(h.Count) * 1e9)
	var ubs []float64
	for ub := range bounds {
		ubs = append(ubs, ub)
	}
	slices.Sort(ubs)
	q := func(p float64) time.Duration {
		rank := p * float64(h.Count)
		prevUB, prevC := 0.0, uint64(0)
		for _, ub := range ubs {
			c := bounds[ub]
			if float64(c) >= rank {
				frac := (rank - float64(prevC)) / math.Max(1, float64(c-prevC))
				return time.Duration((prevUB + frac*(ub-prevUB)) * 1e9)
			}
			prevUB, prevC = ub, c
		}
		// Past the last finite bucket: its bound is the best estimate.
		return time.Duration(prevUB * 1e9)
	}
	h.P50, h.P99 = q(0.5), q(0.99)
	return h
}

// CounterSum gathers the counter name from g, summed per value of its label label (the
// metric missing: an empty map).
func CounterSum(g prometheus.Gatherer, name, label string) map[string]float64 {
	out := map[string]float64{}
	mfs, err := g.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					out[lp.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
