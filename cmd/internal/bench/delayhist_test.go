package bench

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestDelayHist: the quantiles of a registry's delivery_delay histogram, read twice and
// differenced, fall in the buckets of the observations made between the readings.
func TestDelayHist(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "statecast", Subsystem: "player",
		Name: "delivery_delay_seconds", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}, []string{"stream"})
	reg.MustRegister(h)
	for range 1000 {
		h.WithLabelValues("a").Observe(5) // before: not counted
	}
	before, err := delayHist(reg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		v := 0.003 // (0.0032 bucket)
		if i >= 985 {
			v = 0.2 // the top 1.5 %
		}
		h.WithLabelValues([]string{"a", "b"}[i%2]).Observe(v)
	}
	after, err := delayHist(reg)
	if err != nil {
		t.Fatal(err)
	}
	// As the child sends it: JSON.
	b, err := json.Marshal(after)
	if err != nil {
		t.Fatal(err)
	}
	after = DelayHist{}
	if err := json.Unmarshal(b, &after); err != nil {
		t.Fatal(err)
	}
	d := after.Since(before)
	if n := d.Counts[len(d.Counts)-1]; n != 1000 {
		t.Fatalf("%d observations since, want 1000", n)
	}
	if lo, hi := d.Quantile(0.5); !(lo < 0.003 && 0.003 <= hi) {
		t.Fatalf("p50 in (%g, %g], want the bucket of 3 ms", lo, hi)
	}
	if lo, hi := d.Quantile(0.99); !(lo < 0.2 && 0.2 <= hi) || math.IsInf(hi, 1) {
		t.Fatalf("p99 in (%g, %g], want the bucket of 200 ms", lo, hi)
	}
}
