package bench

import (
	"context"
	"errors"
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

func TestPaceWriters(t *testing.T) {
	var mu sync.Mutex
	per := map[int]int{}
	err := PaceWriters(context.Background(), PaceConfig{Writers: 3, Interval: time.Millisecond, Calls: 30}, func(_ context.Context, i int) error {
		mu.Lock()
		per[i]++
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := per[0] + per[1] + per[2]; n != 30 || per[0] == 0 || per[1] == 0 || per[2] == 0 {
		t.Errorf("calls per writer %v, want 30 in all from every writer", per)
	}

	// An error of one writer stops the others and is returned.
	boom := errors.New("boom")
	calls := 0
	err = PaceWriters(context.Background(), PaceConfig{Writers: 2, Interval: time.Millisecond, Duration: time.Minute}, func(_ context.Context, i int) error {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 5 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}

	// A duration ends the run.
	start := time.Now()
	if err := PaceWriters(context.Background(), PaceConfig{Writers: 2, Interval: time.Millisecond, Duration: 20 * time.Millisecond},
		func(context.Context, int) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a 20 ms run took %v", d)
	}
	if PaceWriters(context.Background(), PaceConfig{Writers: 1}, func(context.Context, int) error { return nil }) == nil {
		t.Error("a run without a limit was accepted")
	}
}
