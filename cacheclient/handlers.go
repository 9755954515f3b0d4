package cacheclient

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/statecast/statecast/parallel"
)

// Ordering of change handlers, as in the parallel engine.
type Ordering = parallel.Ordering

// Orderings.
const (
	OrderKey         = parallel.OrderKey
	OrderPartition   = parallel.OrderPartition
	OrderUnordered   = parallel.OrderUnordered
	defaultAttempts  = 5
	defaultBackoff   = 100 * time.Millisecond
	defaultBackoffMx = 5 * time.Second
)

// HandlerOption customises a change handler.
type HandlerOption func(*handlerOpts)

type handlerOpts struct {
	ordering    Ordering
	concurrency int
	attempts    int
	backoff     parallel.Backoff
	initial     bool
	buffer      int
}

// WithOrdering selects which changes must be handled one at a time (default OrderKey: the
// changes of one key in stream order, different keys in parallel).
func WithOrdering(o Ordering) HandlerOption { return func(h *handlerOpts) { h.ordering = o } }

// WithConcurrency sets the number of handler goroutines (default 16).
func WithConcurrency(n int) HandlerOption { return func(h *handlerOpts) { h.concurrency = n } }

// WithRetry sets the attempts per change (default 5) and the backoff between them
// (exponential from base to max, defaults 100ms and 5s). After the last attempt the
// change is reported to Hooks.OnHandlerError and skipped.
func WithRetry(attempts int, base, max time.Duration) HandlerOption {
	return func(h *handlerOpts) {
		h.attempts = attempts
		h.backoff = parallel.ExponentialBackoff(base, max)
	}
}

// WithInitialPass makes WaitReady also wait until this handler has handled the changes
// that built the initial state (one OpCreate per key after a snapshot or a StateDir load).
func WithInitialPass() HandlerOption { return func(h *handlerOpts) { h.initial = true } }

// handlerCore is the type-erased side of a handler, driven by the client.
type handlerCore interface {
	start(ctx context.Context)
	stop()
	initialWait() func(ctx context.Context) error
	// submittedCount is the number of changes handed to the handler; doneCount the number
	// below which every change is complete (handled, or skipped after its attempts).
	submittedCount() int64
	doneCount() int64
}

// handler runs one OnChange function. See dispatch.go for the engine behind it.
type handler[T any] struct {
	view string
	fn   func(ctx context.Context, ch Change[T]) error
	opts handlerOpts
	c    *Client
	d    dispatcher[T]

	submitted atomic.Int64 // changes submitted (written by the connection goroutine)
}

// dispatcher is the engine that runs a handler's changes.
type dispatcher[T any] interface {
	start(ctx context.Context)
	submit(ctx context.Context, seq int64, ch Change[T]) error
	// done returns the sequence number below which every change is complete, and a channel
	// closed when it may have advanced.
	done() (int64, <-chan struct{})
	stop()
}

// OnChange registers fn to run for every change applied to the view, after the batch that
// holds it is published. It must be called before the client starts. fn runs on handler
// goroutines (see WithOrdering); an error is retried with backoff (WithRetry), then
// reported to Hooks.OnHandlerError; it never blocks the changes of other keys (under
// OrderKey). A slow handler eventually slows the application of batches (bounded buffer).
func OnChange[T any](v *View[T], fn func(ctx context.Context, ch Change[T]) error, opts ...HandlerOption) error {
	if fn == nil {
		return fmt.Errorf("%w: nil handler", ErrConfig)
	}
	if err := v.c.checkNotStarted(); err != nil {
		return err
	}
	h := &handler[T]{view: v.name, fn: fn, c: v.c, opts: handlerOpts{
		ordering: OrderKey, concurrency: parallel.DefaultMaxConcurrency, attempts: defaultAttempts,
		backoff: parallel.ExponentialBackoff(defaultBackoff, defaultBackoffMx), buffer: 4096,
	}}
	for _, o := range opts {
		o(&h.opts)
	}
	if h.opts.attempts < 1 || h.opts.concurrency < 1 {
		return fmt.Errorf("%w: handler needs attempts >= 1 and concurrency >= 1", ErrConfig)
	}
	d, err := newDispatcher(h)
	if err != nil {
		return err
	}
	h.d = d
	v.handlers = append(v.handlers, h)
	return nil
}

func (v *View[T]) handlerList() []handlerCore {
	out := make([]handlerCore, len(v.handlers))
	for i, h := range v.handlers {
		out[i] = h
	}
	return out
}

// flushChanges hands the changes of the last published batch to the handlers.
func (v *View[T]) flushChanges(ctx context.Context) error {
	chs := v.takeChanges()
	for _, h := range v.handlers {
		for _, ch := range chs {
			if err := h.d.submit(ctx, h.submitted.Load(), ch); err != nil {
				return err
			}
			h.submitted.Add(1)
		}
	}
	return nil
}

func (h *handler[T]) start(ctx context.Context) { h.d.start(ctx) }
func (h *handler[T]) stop()                     { h.d.stop() }
func (h *handler[T]) submittedCount() int64     { return h.submitted.Load() }
func (h *handler[T]) doneCount() int64          { n, _ := h.d.done(); return n }

func (h *handler[T]) initialWait() func(ctx context.Context) error {
	if !h.opts.initial {
		return nil
	}
	target := h.submitted.Load()
	return func(ctx context.Context) error {
		for {
			done, ch := h.d.done()
			if done >= target {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-ch:
			}
		}
	}
}

func (h *handler[T]) fail(ch Change[T], attempts int, err error) {
	he := &HandlerError{View: h.view, Key: ch.Key, Position: ch.Position, Attempts: attempts, Err: err}
	h.c.st.handlerErrs.Add(1)
	h.c.log.Error("change handler failed; change skipped", "err", he)
	if f := h.c.opts.hooks.OnHandlerError; f != nil {
		f(he)
	}
}
