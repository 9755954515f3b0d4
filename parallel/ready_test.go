package parallel

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
)

// TestLongestBacklogFirst: with one worker busy, the key with the most queued records starts
// first once the worker is free (the heaviest key bounds the makespan).
func TestLongestBacklogFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		var mu sync.Mutex
		var order []string
		e := newEngine(t, Config[int]{
			MaxConcurrency: 1,
			Handler: func(_ context.Context, r Record[int]) error {
				if string(r.Key) == "gate" {
					<-gate
				}
				mu.Lock()
				order = append(order, fmt.Sprintf("%s%d", r.Key, r.Offset))
				mu.Unlock()
				return nil
			},
		})
		submit(t, e, "gate", 0)
		settled(t, "the gate running", func() bool { return e.Stats().InFlight == 1 })
		for off, k := range []string{"a", "b", "c", "b", "c", "b"} {
			submit(t, e, k, int64(off+1))
		}
		close(gate)
		if err := e.Shutdown(context.Background(), Drain); err != nil {
			t.Fatal(err)
		}
		// b (3 queued) first; then b and c tie at 2 and the lower offset wins; then all tie at 1.
		if got := fmt.Sprint(order); got != "[gate0 b2 c3 b4 a1 c5 b6]" {
			t.Fatalf("order %s", got)
		}
	})
}

func TestReadyQueueFIFO(t *testing.T) {
	q := readyQueue[int]{fifo: true}
	for i := range 5 {
		q.push(&item[int]{seq: int64(i), idx: -1})
	}
	if it := q.remove(q.find(3)); it.seq != 3 {
		t.Fatal(it.seq)
	}
	var got []int64
	for q.len() > 0 {
		got = append(got, q.pop().seq)
	}
	if fmt.Sprint(got) != "[0 1 2 4]" {
		t.Fatal(got)
	}
}
