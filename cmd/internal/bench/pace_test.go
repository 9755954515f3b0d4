package bench

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestPace(t *testing.T) {
	var calls []int
	start := time.Now()
	Pace(context.Background(), 1000, func(i int) bool {
		if i >= 20 {
			return false
		}
		calls = append(calls, i)
		return true
	})
	if len(calls) != 20 || calls[19] != 19 {
		t.Fatalf("calls = %v, want 0..19", calls)
	}
	// 20 calls at 1,000/s: the 20th is due 19 ms after the first.
	if d := time.Since(start); d < 19*time.Millisecond {
		t.Errorf("20 calls at 1,000/s took %v, want >= 19ms", d)
	}

	// Behind schedule (f slower than the rate), it catches up without skipping a call.
	n := 0
	Pace(context.Background(), 10_000, func(i int) bool {
		if i != n {
			t.Fatalf("call %d after %d calls: a call was skipped", i, n)
		}
		n++
		if i == 0 {
			time.Sleep(5 * time.Millisecond) // 50 calls behind
		}
		return i < 60
	})

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := 0
	Pace(ctx, 1, func(int) bool { called++; return true })
	if called > 1 {
		t.Errorf("Pace after cancel called f %d times", called)
	}
}

func TestWaitFor(t *testing.T) {
	if WaitFor(10*time.Millisecond, func() bool { return false }) {
		t.Error("WaitFor of a false condition reported true")
	}
	n := 0
	if !WaitFor(time.Second, func() bool { n++; return n == 3 }) {
		t.Error("WaitFor of a condition true at the third poll reported false")
	}
}

func TestEvery(t *testing.T) {
	var mu sync.Mutex
	n := 0
	stop := Every(time.Millisecond, func() {
		mu.Lock()
		n++
		mu.Unlock()
	})
	if !WaitFor(5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return n >= 3 }) {
		t.Fatal("f was not called every millisecond")
	}
	stop()
	mu.Lock()
	after := n
	mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	stop() // a second stop is harmless
	mu.Lock()
	defer mu.Unlock()
	if n != after {
		t.Errorf("f ran %d more times after stop returned", n-after)
	}
}
