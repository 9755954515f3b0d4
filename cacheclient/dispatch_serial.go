package cacheclient

import (
	"context"
	"sync"
)

// serialDispatcher runs a handler's changes one at a time, in index order, on one goroutine.
// It satisfies every Ordering (it is stricter than all of them) but a retrying change
// delays all later changes, not only those of its key.
type serialDispatcher[T any] struct {
	h      *handler[T]
	q      chan queued[T]
	wg     sync.WaitGroup
	stopCh chan struct{}

	mu     sync.Mutex
	doneN  int64
	notify chan struct{}
}

type queued[T any] struct {
	seq int64
	ch  Change[T]
}

func newSerialDispatcher[T any](h *handler[T]) *serialDispatcher[T] {
	return &serialDispatcher[T]{h: h, q: make(chan queued[T], h.opts.buffer), notify: make(chan struct{}), stopCh: make(chan struct{})}
}

func (d *serialDispatcher[T]) start(ctx context.Context) {
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-d.stopCh:
				return
			case q := <-d.q:
				d.h.run(ctx, q.ch)
				d.mu.Lock()
				d.doneN = q.seq + 1
				close(d.notify)
				d.notify = make(chan struct{})
				d.mu.Unlock()
			}
		}
	}()
}

func (d *serialDispatcher[T]) submit(ctx context.Context, seq int64, ch Change[T]) error {
	select {
	case d.q <- queued[T]{seq, ch}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *serialDispatcher[T]) done() (int64, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.doneN, d.notify
}

func (d *serialDispatcher[T]) stop() {
	select {
	case <-d.stopCh:
	default:
		close(d.stopCh)
	}
	d.wg.Wait()
}
