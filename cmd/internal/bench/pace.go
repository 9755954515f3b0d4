package bench

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
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

// PaceConfig says how PaceWriters paces its writers and when they stop.
type PaceConfig struct {
	Writers int
	// Interval is the time between one writer's calls (Writers / Interval calls per second
	// in all); 0 runs every writer as fast as it can.
	Interval time.Duration
	// Duration and Calls end the run: a writer stops at the first call that would start
	// after Duration, or once Calls calls were begun by all writers together; 0 is no
	// limit.
	Duration time.Duration
	Calls    int
}

// PaceWriters runs cfg.Writers goroutines, writer i calling f(ctx, i) on its own schedule,
// until cfg's limits or ctx's end. The writers' schedules are staggered so that their calls
// interleave evenly; a writer that falls behind catches up without sleeping, so a slow call
// delays the next ones rather than dropping them (no coordinated omission). After an error
// of f the other writers stop and PaceWriters returns it.
func PaceWriters(ctx context.Context, cfg PaceConfig, f func(ctx context.Context, i int) error) error {
	if cfg.Duration <= 0 && cfg.Calls <= 0 {
		return errors.New("bench: a paced run needs a duration or a call count")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start := time.Now()
	var end time.Time
	if cfg.Duration > 0 {
		end = start.Add(cfg.Duration)
	}
	var begun atomic.Int64
	var wg sync.WaitGroup
	for i := range cfg.Writers {
		wg.Go(func() {
			next := start.Add(cfg.Interval * time.Duration(i) / time.Duration(cfg.Writers))
			for {
				if d := time.Until(next); d > 0 {
					select {
					case <-ctx.Done():
						return
					case <-time.After(d):
					}
				}
				if ctx.Err() != nil || !end.IsZero() && !time.Now().Before(end) ||
					cfg.Calls > 0 && begun.Add(1) > int64(cfg.Calls) {
					return
				}
				if err := f(ctx, i); err != nil {
					cancel(err)
					return
				}
				next = next.Add(cfg.Interval)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
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
