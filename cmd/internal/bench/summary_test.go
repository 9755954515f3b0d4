package bench

import (
	"slices"
	"testing"
	"time"
)

// ms1to returns 1ms, 2ms, ..., n ms, shuffled by reversal (Summarize must sort).
func ms1to(n int) []time.Duration {
	var ds []time.Duration
	for i := n; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	return ds
}

func TestQuantile(t *testing.T) {
	sorted := func(n int) []time.Duration {
		s := ms1to(n)
		slices.Sort(s)
		return s
	}
	for _, tc := range []struct {
		name string
		s    []time.Duration
		q    float64
		want time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", sorted(1), 0.99, time.Millisecond},
		{"p50 of 10 is the 6th", sorted(10), 0.5, 6 * time.Millisecond},
		{"p99 of 100 is the largest", sorted(100), 0.99, 100 * time.Millisecond},
		{"p99 of 1000 is the 991st", sorted(1000), 0.99, 991 * time.Millisecond},
		{"p0 is the smallest", sorted(1000), 0, time.Millisecond},
		{"p100 is clamped to the largest", sorted(7), 1, 7 * time.Millisecond},
	} {
		if got := Quantile(tc.s, tc.q); got != tc.want {
			t.Errorf("%s: Quantile(n=%d, %v) = %v, want %v", tc.name, len(tc.s), tc.q, got, tc.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	ds := ms1to(1000)
	before := slices.Clone(ds)
	s := Summarize(ds)
	want := Summary{N: 1000, Avg: 500500 * time.Microsecond, P50: 501 * time.Millisecond, P99: 991 * time.Millisecond, Max: 1000 * time.Millisecond}
	if s != want {
		t.Fatalf("Summarize = %+v, want %+v", s, want)
	}
	if !slices.Equal(ds, before) {
		t.Fatal("Summarize reordered its input")
	}
	if (Summarize(nil) != Summary{}) {
		t.Fatal("Summarize(nil) is not the zero summary")
	}
}

func TestSummaryFormats(t *testing.T) {
	s := Summarize([]time.Duration{1500 * time.Microsecond, 2 * time.Millisecond, 250 * time.Microsecond})
	if got, want := s.String(), "avg 1.250  p50 1.500  p99 2.000  max 2.000 ms (n=3)"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got := (Summary{}).String(); got != "n=0" {
		t.Errorf("empty String = %q, want n=0", got)
	}
	got := s.Line("floor")
	want := "floor                                        n=3     p50=1.50ms    p99=2.00ms    max=2.00ms"
	if got != want {
		t.Errorf("Line =\n%q, want\n%q", got, want)
	}
	if got, want := MS(1234567*time.Nanosecond), "1.235"; got != want {
		t.Errorf("MS = %q, want %q", got, want)
	}
}

func TestRatioVerdictMedian(t *testing.T) {
	if got := Ratio(3*time.Millisecond, 2*time.Millisecond); got != 1.5 {
		t.Errorf("Ratio(3ms, 2ms) = %v, want 1.5", got)
	}
	if got := Ratio(3*time.Millisecond, 0); got != 0 {
		t.Errorf("Ratio over a zero baseline = %v, want 0", got)
	}
	if got := Ratio(50_000.0, 200_000.0); got != 0.25 {
		t.Errorf("Ratio of rates = %v, want 0.25", got)
	}
	if Verdict(true) != "MET" || Verdict(false) != "NOT MET" {
		t.Errorf("Verdict = %q / %q", Verdict(true), Verdict(false))
	}
	xs := []float64{3, 1, 2}
	if got := Median(xs); got != 2 {
		t.Errorf("Median(3,1,2) = %v, want 2", got)
	}
	if !slices.Equal(xs, []float64{3, 1, 2}) {
		t.Error("Median reordered its input")
	}
	if got := Median([]float64{4, 1, 3, 2}); got != 3 {
		t.Errorf("Median of four = %v, want the upper middle 3", got)
	}
	if got := Median(nil); got != 0 {
		t.Errorf("Median(nil) = %v", got)
	}
}

func TestPoolAndSpread(t *testing.T) {
	var p Pool
	p.Add(ms1to(100))
	if got := p.Spread(); got != "" {
		t.Errorf("one round: Spread = %q, want none", got)
	}
	p.Add([]time.Duration{7 * time.Millisecond})
	if got, want := p.Spread(), "   p99 per round: 100.000 / 7.000"; got != want {
		t.Errorf("Spread = %q, want %q", got, want)
	}
	if s := p.Summary(); s.N != 101 || s.Max != 100*time.Millisecond {
		t.Errorf("pooled summary = %+v, want n=101 max=100ms", s)
	}
}

func TestRate(t *testing.T) {
	r := Rate{Name: "limit: COPY", Rows: 1000, D: 500 * time.Millisecond}
	if r.PerSecond() != 2000 {
		t.Fatalf("PerSecond = %v, want 2000", r.PerSecond())
	}
	want := "  limit: COPY                                         2000 rows/s  (1000 rows in 0.50s)"
	if got := r.String(); got != want {
		t.Errorf("String =\n%q, want\n%q", got, want)
	}
}
