package bench

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var at []time.Duration
		start := time.Now()
		Pace(context.Background(), 1000, func(i int) bool {
			if i >= 20 {
				return false
			}
			at = append(at, time.Since(start))
			return true
		})
		// 20 calls at 1,000/s: call i is due i ms after the first, and runs then.
		if len(at) != 20 {
			t.Fatalf("%d calls, want 20", len(at))
		}
		for i, d := range at {
			if d != time.Duration(i)*time.Millisecond {
				t.Fatalf("call %d at %v, want %v", i, d, time.Duration(i)*time.Millisecond)
			}
		}

		// Behind schedule (f slower than the rate), it catches up without skipping a call
		// and without sleeping: the calls that fell due while f was slow run at once.
		n := 0
		start = time.Now()
		Pace(context.Background(), 10_000, func(i int) bool {
			if i != n {
				t.Fatalf("call %d after %d calls: a call was skipped", i, n)
			}
			n++
			d := time.Since(start)
			switch {
			case i == 0:
				time.Sleep(5 * time.Millisecond) // 50 calls behind
			case i <= 50 && d != 5*time.Millisecond:
				t.Fatalf("call %d, due at %v, ran at %v, not at once after the slow call", i, time.Duration(i)*100*time.Microsecond, d)
			case i > 50 && d != time.Duration(i)*100*time.Microsecond:
				t.Fatalf("call %d ran at %v, want on schedule again at %v", i, d, time.Duration(i)*100*time.Microsecond)
			}
			return i < 60
		})
		if n != 61 {
			t.Fatalf("%d calls, want 61", n)
		}

		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		called := 0
		Pace(ctx, 1, func(int) bool { called++; return true })
		if called > 1 {
			t.Errorf("Pace after cancel called f %d times", called)
		}
	})
}

func TestWaitFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if WaitFor(10*time.Millisecond, func() bool { return false }) {
			t.Error("WaitFor of a false condition reported true")
		}
		if d := time.Since(start); d != 10*time.Millisecond {
			t.Errorf("WaitFor of a false condition gave up after %v, want its 10ms timeout", d)
		}
		n := 0
		start = time.Now()
		if !WaitFor(time.Second, func() bool { n++; return n == 3 }) {
			t.Error("WaitFor of a condition true at the third poll reported false")
		}
		if d := time.Since(start); d != 4*time.Millisecond {
			t.Errorf("the third poll, 2 ms apart, came after %v, want 4ms", d)
		}
	})
}

func TestEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		n := 0
		count := func() int { mu.Lock(); defer mu.Unlock(); return n }
		stop := Every(time.Millisecond, func() {
			mu.Lock()
			n++
			mu.Unlock()
		})
		time.Sleep(3 * time.Millisecond)
		synctest.Wait() // the tick at 3 ms has been handled
		if got := count(); got != 3 {
			t.Fatalf("f called %d times in 3ms, want once every millisecond", got)
		}
		stop()
		after := count()
		time.Sleep(20 * time.Millisecond)
		stop() // a second stop is harmless
		if got := count(); got != after {
			t.Errorf("f ran %d more times after stop returned", got-after)
		}
	})
}

func TestPaceWriters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 2 writers, each every 2 ms, staggered by 1 ms, until 10 ms: writer 0 at 0, 2, .., 8
		// ms, writer 1 at 1, 3, .., 9 ms.
		var mu sync.Mutex
		at := map[int][]time.Duration{}
		start := time.Now()
		err := PaceWriters(context.Background(), PaceConfig{Writers: 2, Interval: 2 * time.Millisecond, Duration: 10 * time.Millisecond},
			func(_ context.Context, i int) error {
				mu.Lock()
				at[i] = append(at[i], time.Since(start))
				mu.Unlock()
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		for w := range 2 {
			if len(at[w]) != 5 {
				t.Fatalf("writer %d called at %v, want 5 calls", w, at[w])
			}
			for k, d := range at[w] {
				if want := time.Duration(2*k+w) * time.Millisecond; d != want {
					t.Fatalf("writer %d's call %d at %v, want %v", w, k, d, want)
				}
			}
		}

		// A call count ends the run, counted over all writers.
		n := 0
		if err := PaceWriters(context.Background(), PaceConfig{Writers: 3, Interval: time.Millisecond, Calls: 30}, func(context.Context, int) error {
			mu.Lock()
			n++
			mu.Unlock()
			return nil
		}); err != nil || n != 30 {
			t.Fatalf("%d calls (%v), want 30", n, err)
		}

		// An error of one writer stops the others and is returned.
		boom := errors.New("boom")
		calls := 0
		err = PaceWriters(context.Background(), PaceConfig{Writers: 2, Interval: time.Millisecond, Duration: time.Minute}, func(context.Context, int) error {
			mu.Lock()
			defer mu.Unlock()
			calls++
			if calls == 5 {
				return boom
			}
			return nil
		})
		if !errors.Is(err, boom) || calls > 6 {
			t.Errorf("err = %v after %d calls, want boom after 5 (or 6: the other writer's call under way)", err, calls)
		}
		if PaceWriters(context.Background(), PaceConfig{Writers: 1}, func(context.Context, int) error { return nil }) == nil {
			t.Error("a run without a limit was accepted")
		}
	})
}
