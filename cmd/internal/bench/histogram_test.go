package bench

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestHistogramOf(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "delay_seconds", Help: "h",
		Buckets: []float64{0.001, 0.01, 0.1}}, []string{"stream"})
	reg.MustRegister(h)
	// Two label sets, summed: 50 observations in (0, 1ms], 50 in (1ms, 10ms].
	for range 25 {
		h.WithLabelValues("a").Observe(0.0005)
		h.WithLabelValues("b").Observe(0.0005)
		h.WithLabelValues("a").Observe(0.005)
		h.WithLabelValues("b").Observe(0.005)
	}
	got := HistogramOf(reg, "delay_seconds")
	if got.Count != 100 {
		t.Fatalf("count = %d, want 100", got.Count)
	}
	near := func(name string, got, want time.Duration) {
		t.Helper()
		if d := got - want; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	near("mean", got.Mean, 2750*time.Microsecond)
	// p50: rank 50 reaches the top of the first bucket exactly.
	near("p50", got.P50, time.Millisecond)
	// p99: rank 99 is 49/50 of the way through (1ms, 10ms].
	near("p99", got.P99, 9820*time.Microsecond)

	if (HistogramOf(reg, "missing") != Histogram{}) {
		t.Error("a missing histogram is not zero")
	}
}

func TestCounterSum(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rereads_total", Help: "c"}, []string{"view", "reason"})
	reg.MustRegister(c)
	c.WithLabelValues("a", "unmapped").Add(3)
	c.WithLabelValues("a", "retry").Add(1)
	c.WithLabelValues("b", "unmapped").Add(2)
	got := CounterSum(reg, "rereads_total", "view")
	if len(got) != 2 || got["a"] != 4 || got["b"] != 2 {
		t.Errorf("per view = %v, want a 4, b 2", got)
	}
	if len(CounterSum(reg, "missing", "view")) != 0 {
		t.Error("a missing counter is not empty")
	}
}
