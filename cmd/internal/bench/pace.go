package bench

import (
	"context"
	"sync"
	"time"
)

// Pace calls f(i) for i = 0.. at rate per second until ctx ends or f returns false.
// When behind it catches up without sleeping: skipping the missed calls would hide the
// delay a slow system causes (coordinated omission).
func Pace(ctx context.Context, rate int, f func(i int) bool) {
	interval := time.Second / time.Duration(rate)
	next := time.Now()
	for i := 0; ; i++ {
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		} else if ctx.Err() != nil {
			return
		}
		if !f(i) {
			return
		}
		next = next.Add(interval)
	}
}

// WaitFor polls cond every 2 ms until it holds or timeout passes, and reports whether it
// held.
func WaitFor(timeout time.Duration, cond func() bool) bool {
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		if cond() {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return cond()
}

// Every calls f every interval on a goroutine of its own until stop is called. stop
// returns once f is no longer running and may be called more than once.
func Every(interval time.Duration, f func()) (stop func()) {
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(interval)
		defer tk.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tk.C:
				f()
			}
		}
	}()
	return sync.OnceFunc(func() {
		close(quit)
		<-done
	})
}
