//go:build linux

package parallel

import (
	"syscall"
	"time"
	"unsafe"
)

// Simulated work for the benchmarks. Go's time.Sleep overshoots a 0–5 ms sleep by ~0.6–0.9 ms
// on this host (the runtime's idle wait is epoll_wait, millisecond resolution), so a table
// measured with it measures the timer, not the scheduler. These alternatives block the
// worker's OS thread in the kernel instead; the Go runtime hands the P to another thread while
// the syscall blocks (GOMAXPROCS is unchanged; one OS thread per concurrent sleeper). None of
// them spins. BenchmarkSleepAccuracy measures each one.

const (
	clockMonotonic  = 1 // CLOCK_MONOTONIC
	timerAbstime    = 1 // TIMER_ABSTIME
	prSetTimerslack = 29
)

// defaultWork is the seed table's work function unless -pc.work names another.
const defaultWork = "timerthread+cal"

// sleepers maps a name to a constructor of the work function and its stop function.
var sleepers = map[string]func() (func(time.Duration), func()){
	"time.Sleep": plain(time.Sleep),
	"nanosleep":  plain(nanosleep),
	"abstime":    plain(func(d time.Duration) { sleepUntil(monoNow()+int64(d), false) }),
	"abstime+slack1ns": plain(func(d time.Duration) {
		sleepUntil(monoNow()+int64(d), true)
	}),
	"hybrid-1ms": plain(func(d time.Duration) { hybridSleep(d, time.Millisecond) }),
	"hybrid-2ms": plain(func(d time.Duration) { hybridSleep(d, 2*time.Millisecond) }),
	"timerthread": func() (func(time.Duration), func()) {
		t := newPreciseTimer()
		return t.Sleep, t.Close
	},
	"timerthread+cal": func() (func(time.Duration), func()) {
		t := newPreciseTimer()
		return calibrated(t.Sleep), t.Close
	},
	"abstime+slack1ns+cal": plain(calibrated(func(d time.Duration) {
		sleepUntil(monoNow()+int64(d), true)
	})),
}

func plain(f func(time.Duration)) func() (func(time.Duration), func()) {
	return func() (func(time.Duration), func()) { return f, func() {} }
}

// nanosleep is a relative nanosleep(2), resumed with the remaining time on EINTR.
func nanosleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for {
		var rem syscall.Timespec
		if err := syscall.Nanosleep(&ts, &rem); err != syscall.EINTR {
			return
		}
		ts = rem
	}
}

// monoNow reads CLOCK_MONOTONIC in nanoseconds (the clock clock_nanosleep sleeps on).
func monoNow() int64 {
	var ts syscall.Timespec
	syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// sleepUntil blocks the thread in clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) until the
// monotonic deadline (EINTR retries against the same deadline, so no drift). With slack it
// first sets the calling thread's timer slack to 1 ns (Linux default 50 µs).
func sleepUntil(deadline int64, slack bool) {
	if slack {
		syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerslack, 1, 0)
	}
	ts := syscall.NsecToTimespec(deadline)
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_CLOCK_NANOSLEEP, clockMonotonic, timerAbstime,
			uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		if e != syscall.EINTR {
			return
		}
	}
}

// hybridSleep parks the goroutine with time.Sleep for all but the last margin (no OS thread
// held meanwhile), then blocks the thread in clock_nanosleep until the exact deadline.
func hybridSleep(d, margin time.Duration) {
	deadline := monoNow() + int64(d)
	if d > margin {
		time.Sleep(d - margin)
	}
	sleepUntil(deadline, false)
}
