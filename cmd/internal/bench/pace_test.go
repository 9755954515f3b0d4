package bench

import (
	"context"
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
