package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Summary of a latency sample.
type Summary struct {
	N             int
	Avg, P50, P99 time.Duration
	Max           time.Duration
}

// Summarize returns the count, mean, median, 99th percentile and maximum of ds (ds is not
// modified). The quantiles are nearest-rank without interpolation (Quantile).
func Summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Summary{N: len(s), Avg: sum / time.Duration(len(s)), P50: Quantile(s, 0.50), P99: Quantile(s, 0.99), Max: s[len(s)-1]}
}

// Quantile returns the element of the sorted sample at rank q·n (0 ≤ q ≤ 1), clamped to
// the last element: p99 of 100 values is the largest, of 1,000 the 991st. An empty
// sample gives 0.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// MS formats d in milliseconds with three decimals.
func MS(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) }

// String is the summary on one line, in milliseconds.
func (s Summary) String() string {
	if s.N == 0 {
		return "n=0"
	}
	return fmt.Sprintf("avg %s  p50 %s  p99 %s  max %s ms (n=%d)", MS(s.Avg), MS(s.P50), MS(s.P99), MS(s.Max), s.N)
}

// Line is the summary as one row of a table named name: count, p50, p99 and max.
func (s Summary) Line(name string) string {
	f := func(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/1e6) }
	return fmt.Sprintf("%-44s n=%-5d p50=%-9s p99=%-9s max=%s", name, s.N, f(s.P50), f(s.P99), f(s.Max))
}

// Ratio is a/b, the measured value over its same-run baseline; 0 when the baseline is 0
// (nothing measured), so callers print a ratio only when both sides have samples.
func Ratio[T time.Duration | float64](a, b T) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Verdict is how a goal's line ends: MET or NOT MET.
func Verdict(met bool) string {
	if met {
		return "MET"
	}
	return "NOT MET"
}

// Median of xs (the upper one of an even count); xs is not modified. 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// Spread prints the per-round values of a pooled sample ("   p99 per round: a / b"), or
// nothing for a single round.
func Spread(perRound []string) string {
	if len(perRound) < 2 {
		return ""
	}
	return "   p99 per round: " + strings.Join(perRound, " / ")
}

// Rate is a throughput result: rows in d.
type Rate struct {
	Name string
	Rows int64
	D    time.Duration
}

// PerSecond is the rate in rows per second.
func (r Rate) PerSecond() float64 { return float64(r.Rows) / r.D.Seconds() }

func (r Rate) String() string {
	return fmt.Sprintf("  %-46s %9.0f rows/s  (%d rows in %.2fs)", r.Name, r.PerSecond(), r.Rows, r.D.Seconds())
}

// Pool pools the samples of several rounds of one measurement and keeps each round's p99,
// so that a system meets the machine's quiet and busy moments alike and the spread
// between rounds is still shown.
type Pool struct {
	Samples []time.Duration
	P99s    []string // per round, in ms (MS)
}

// Add pools one round's samples.
func (p *Pool) Add(round []time.Duration) {
	p.Samples = append(p.Samples, round...)
	p.P99s = append(p.P99s, MS(Summarize(round).P99))
}

// Summary summarizes the pooled samples.
func (p *Pool) Summary() Summary { return Summarize(p.Samples) }

// Spread is Spread of the per-round p99s.
func (p *Pool) Spread() string { return Spread(p.P99s) }
