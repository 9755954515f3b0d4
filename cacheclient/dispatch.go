package cacheclient

import (
	"context"
	"sync"

	"github.com/statecast/statecast/parallel"
)

// engineDispatcher runs a handler's changes on a parallel.Engine: under OrderKey the
// changes of one key run one at a time in index order, different keys in parallel; a
// failing change is retried with backoff while its key waits, then dead-lettered to
// Hooks.OnHandlerError (FailSkip), so it never blocks other keys.
type engineDispatcher[T any] struct {
	h   *handler[T]
	eng *parallel.Engine[Change[T]]

	mu     sync.Mutex
	notify chan struct{}
}

func newDispatcher[T any](h *handler[T]) (dispatcher[T], error) {
	return &engineDispatcher[T]{h: h, notify: make(chan struct{})}, nil
}

func (d *engineDispatcher[T]) start(context.Context) {
	h := d.h
	eng, err := parallel.New(parallel.Config[Change[T]]{
		Ordering:       h.opts.ordering,
		MaxConcurrency: h.opts.concurrency,
		Handler: func(ctx context.Context, r parallel.Record[Change[T]]) (err error) {
			// The engine would recover a panic too; recovered here, it is counted and
			// reported as a *PanicError like the client's other recovered panics.
			defer func() {
				if p := recover(); p != nil {
					err = h.c.recovered(p, "change handler", h.view, r.Value.Key)
				}
			}()
			return h.fn(ctx, r.Value)
		},
		MaxBufferedRecords: h.opts.buffer,
		MaxAttempts:        h.opts.attempts,
		Backoff:            h.opts.backoff,
		OnFailure:          parallel.FailSkip,
		DeadLetter: func(_ context.Context, r parallel.Record[Change[T]], err error) {
			h.fail(r.Value, h.opts.attempts, err)
		},
		Logger: h.c.log,
		Hooks: parallel.Hooks{OnComplete: func(int64, int, bool) {
			d.mu.Lock()
			close(d.notify)
			d.notify = make(chan struct{})
			d.mu.Unlock()
		}},
	})
	if err != nil {
		// The options were validated by OnChange; this cannot happen.
		panic(err)
	}
	d.eng = eng
}

func (d *engineDispatcher[T]) submit(ctx context.Context, seq int64, ch Change[T]) error {
	return d.eng.Submit(ctx, parallel.Record[Change[T]]{Key: []byte(ch.Key), Offset: seq, Value: ch})
}

func (d *engineDispatcher[T]) done() (int64, <-chan struct{}) {
	d.mu.Lock()
	ch := d.notify
	d.mu.Unlock()
	return d.eng.Progress().Watermark, ch
}

func (d *engineDispatcher[T]) stop() { d.eng.Close() }
