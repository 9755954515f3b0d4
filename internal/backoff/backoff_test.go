package backoff

import (
	"context"
	"testing"
	"time"
)

func TestDelayBounds(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name     string
		p        Policy
		ceilings []time.Duration // Ceiling(0), Ceiling(1), ...
	}{
		{"distributor", Policy{Min: 100 * ms, Max: 30 * time.Second},
			[]time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms, 12800 * ms, 25600 * ms, 30 * time.Second, 30 * time.Second}},
		{"cacheclient", Policy{Min: 100 * ms, Max: 5 * time.Second},
			[]time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5 * time.Second, 5 * time.Second}},
		{"transaction", Policy{Min: ms, Max: 100 * ms},
			[]time.Duration{ms, 2 * ms, 4 * ms, 8 * ms, 16 * ms, 32 * ms, 64 * ms, 100 * ms, 100 * ms}},
		{"constant", Policy{Min: 2 * time.Second, Max: 2 * time.Second},
			[]time.Duration{2 * time.Second, 2 * time.Second}},
		{"max below min", Policy{Min: time.Second, Max: ms},
			[]time.Duration{time.Second, time.Second}},
		{"none", Policy{}, []time.Duration{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := max(tc.p.Max, tc.p.Min)
			for n, want := range tc.ceilings {
				if got := tc.p.Ceiling(n); got != want {
					t.Fatalf("Ceiling(%d) = %s, want %s", n, got, want)
				}
				// The extremes of the draw: the lower and the upper end of the jitter.
				lo := tc.p.delay(n, func(int64) int64 { return 0 })
				hi := tc.p.delay(n, func(m int64) int64 { return m - 1 })
				if wantLo := min(max(want/2, tc.p.Min), top); lo != wantLo {
					t.Errorf("attempt %d: lowest wait %s, want %s", n, lo, wantLo)
				}
				if hi != want {
					t.Errorf("attempt %d: highest wait %s, want %s", n, hi, want)
				}
				for range 200 {
					d := tc.p.Delay(n)
					if d < tc.p.Min || d > top || d > want || d < want/2 {
						t.Fatalf("attempt %d: wait %s outside [max(%s, %s/2), %s]", n, d, tc.p.Min, want, want)
					}
				}
			}
			if d := tc.p.Delay(-3); d != tc.p.Delay(0) && (d < tc.p.Min || d > tc.p.Ceiling(0)) {
				t.Errorf("Delay(-3) = %s, want the first wait", d)
			}
			if d := tc.p.Delay(1 << 20); d > top {
				t.Errorf("Delay(huge) = %s, above Max", d)
			}
		})
	}
}

// TestJitter checks that waits are spread over the upper half of the ceiling, not one value.
func TestJitter(t *testing.T) {
	p := Policy{Min: 100 * time.Millisecond, Max: 30 * time.Second}
	const n = 4000
	ceil := p.Ceiling(4) // 1.6s: waits in [0.8s, 1.6s]
	seen := make(map[time.Duration]bool)
	var sum time.Duration
	var low, high int
	for range n {
		d := p.Delay(4)
		seen[d] = true
		sum += d
		switch {
		case d < ceil*5/8:
			low++
		case d > ceil*7/8:
			high++
		}
	}
	if len(seen) < n/2 {
		t.Errorf("%d distinct waits of %d draws: not jittered", len(seen), n)
	}
	// Uniform over [c/2, c]: the mean is 3c/4, each outer quarter of the range holds 1/4.
	mean := sum / n
	if mean < ceil*70/100 || mean > ceil*80/100 {
		t.Errorf("mean wait %s, want about %s", mean, ceil*3/4)
	}
	if low < n/6 || high < n/6 {
		t.Errorf("%d waits in the lowest quarter and %d in the highest of %d: not uniform", low, high, n)
	}
}

func TestBackoffNextReset(t *testing.T) {
	b := New(Policy{Min: 10 * time.Millisecond, Max: 80 * time.Millisecond})
	for i, ceil := range []time.Duration{10, 20, 40, 80, 80, 80} {
		ceil *= time.Millisecond
		if d := b.Next(); d > ceil || d < max(ceil/2, 10*time.Millisecond) {
			t.Fatalf("Next #%d = %s, want in [%s, %s]", i, d, max(ceil/2, 10*time.Millisecond), ceil)
		}
	}
	b.Reset()
	if d := b.Next(); d != 10*time.Millisecond {
		t.Fatalf("Next after Reset = %s, want the first wait, 10ms", d)
	}
}

func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Error("Sleep(1ms) did not report the whole wait")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if Sleep(ctx, time.Hour) {
		t.Error("Sleep on an ended context reported the whole wait")
	}
	if time.Since(start) > time.Second {
		t.Error("Sleep on an ended context waited")
	}
	if Sleep(ctx, 0) {
		t.Error("Sleep(0) on an ended context reported success")
	}
}
