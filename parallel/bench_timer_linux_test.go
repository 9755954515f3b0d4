//go:build linux

package parallel

import (
	"container/heap"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// preciseTimer is a timer service for the benchmarks' simulated work: sleepers park on a
// channel like time.Sleep (no OS thread and no P held while they wait), and one goroutine
// locked to its own OS thread waits in ppoll(2) — nanosecond timeout, the thread's timer
// slack set to 1 ns — until the earliest deadline, then wakes every sleeper that is due.
// A new earlier deadline interrupts the wait through an eventfd. No spinning.
type preciseTimer struct {
	mu      sync.Mutex
	waits   deadlineHeap
	efd     int
	closed  bool
	stopped chan struct{}
}

type deadlineWait struct {
	at   int64 // CLOCK_MONOTONIC ns
	done chan struct{}
}

type deadlineHeap []deadlineWait

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h deadlineHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)        { *h = append(*h, x.(deadlineWait)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func newPreciseTimer() *preciseTimer {
	fd, _, e := syscall.RawSyscall(syscall.SYS_EVENTFD2, 0, syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if e != 0 {
		panic("eventfd2: " + e.Error())
	}
	t := &preciseTimer{efd: int(fd), stopped: make(chan struct{})}
	go t.loop()
	return t
}

// Sleep blocks the calling goroutine until d has passed on CLOCK_MONOTONIC.
func (t *preciseTimer) Sleep(d time.Duration) {
	w := deadlineWait{at: monoNow() + int64(d), done: make(chan struct{})}
	t.mu.Lock()
	heap.Push(&t.waits, w)
	first := t.waits[0].at == w.at
	t.mu.Unlock()
	if first {
		t.kick()
	}
	<-w.done
}

// Close stops the timer goroutine (its locked thread exits with it) after waking everyone.
func (t *preciseTimer) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.kick()
	<-t.stopped
	syscall.Close(t.efd)
}

func (t *preciseTimer) kick() {
	one := [8]byte{1}
	syscall.Write(t.efd, one[:])
}

func (t *preciseTimer) loop() {
	defer close(t.stopped)
	runtime.LockOSThread() // never unlocked: the thread (with its changed timer slack) exits with the goroutine
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerslack, 1, 0)
	type pollFd struct {
		fd             int32
		events, revent int16
	}
	pfd := pollFd{fd: int32(t.efd), events: 0x1} // POLLIN
	var buf [8]byte
	for {
		t.mu.Lock()
		now := monoNow()
		for len(t.waits) > 0 && (t.waits[0].at <= now || t.closed) {
			close(heap.Pop(&t.waits).(deadlineWait).done)
		}
		if t.closed {
			t.mu.Unlock()
			return
		}
		wait := len(t.waits) > 0
		var ts syscall.Timespec
		if wait {
			ts = syscall.NsecToTimespec(t.waits[0].at - now)
		}
		t.mu.Unlock()
		if wait {
			syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		} else { // no deadline: wait for a kick
			syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, 0, 0, 0, 0)
		}
		syscall.Read(t.efd, buf[:]) // reset the eventfd (EAGAIN when it was a timeout)
	}
}
