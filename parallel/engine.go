package parallel

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// Engine runs records through a worker pool under an ordering rule. See the package
// documentation for its goroutines and concurrency rules.
type Engine[T any] struct {
	cfg    Config[T]
	ctx    context.Context // handler context
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	work     *sync.Cond    // workers wait here for ready records or the end
	space    chan struct{} // capacity 1: a kick for one blocked Submit
	ended    chan struct{} // closed when Submit can no longer succeed (closing or stopped)
	waiters  int
	tr       *tracker
	resume   *Checkpoint
	ready    readyQueue[T]
	keys     map[string]*keyQueue[T]
	serial   *keyQueue[T] // OrderPartition
	freeKQ   []*keyQueue[T]
	timers   map[*item[T]]*time.Timer
	records  int   // submitted, not complete, not dropped
	bytes    int64 // their sizes
	queued   int
	inFlight int // running or waiting for a retry
	running  int
	alive    int // workers
	closing  bool
	mode     ShutdownMode
	abandon  bool // completions are ignored (shutdown timed out)
	stopErr  error
	stats    Stats
}

type item[T any] struct {
	rec      Record[T]
	seq      int64
	size     int64
	attempts int
	kq       *keyQueue[T]
	idx      int // position in the ready queue, -1 when not in it
}

type keyQueue[T any] struct {
	key   string
	items []*item[T] // items[0] is ready, running or retrying
}

// Progress is a consistent snapshot of what can be committed.
type Progress struct {
	// Watermark is the lowest observed offset not complete, or the highest observed + 1.
	// Before any record was observed it is Resume's watermark, or 0 without Resume.
	Watermark int64
	// Metadata is the encoded completed set above Watermark (Checkpoint.Encode).
	Metadata string
	// Checkpoint is the decoded form of Metadata's source (not truncated).
	Checkpoint Checkpoint
}

// Stats are the engine's counters and gauges.
type Stats struct {
	InFlight      int   // records being processed or waiting for a retry
	Queued        int   // records submitted and not yet dispatched
	Completed     int64 // records completed successfully (including resumed skips)
	Failed        int64 // records whose attempts were exhausted
	Retried       int64 // failed attempts that were retried
	Watermark     int64
	MetadataBytes int // estimated upper bound of the encoded metadata size
	Paused        bool
}

// New validates cfg (Config.Validate: the defaults filled) and starts the workers.
func New[T any](cfg Config[T]) (*Engine[T], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Engine[T]{
		cfg:    cfg,
		ctx:    ctx,
		cancel: cancel,
		done:   make(chan struct{}),
		space:  make(chan struct{}, 1),
		ended:  make(chan struct{}),
		keys:   make(map[string]*keyQueue[T]),
		timers: make(map[*item[T]]*time.Timer),
		resume: cfg.Resume,
	}
	start := int64(0)
	if cfg.Resume != nil {
		start = cfg.Resume.Watermark
	}
	e.tr = newTracker(start)
	e.work = sync.NewCond(&e.mu)
	e.ready.fifo = cfg.Ordering == OrderUnordered
	if cfg.Ordering == OrderPartition {
		e.serial = &keyQueue[T]{}
	}
	e.alive = cfg.MaxConcurrency
	for range cfg.MaxConcurrency {
		go e.worker()
	}
	return e, nil
}

// Submit queues r, blocking while the buffer is full or the metadata is at 75 % of its
// bound. It returns ctx.Err(), ErrClosed, ErrOffsetOrder or the error that stopped the engine.
func (e *Engine[T]) Submit(ctx context.Context, r Record[T]) error {
	size := r.size()
	e.mu.Lock()
	for {
		if e.stopErr != nil {
			err := e.stopErr
			e.mu.Unlock()
			return err
		}
		if e.closing {
			e.mu.Unlock()
			return ErrClosed
		}
		if r.Offset <= e.tr.last || r.Offset < 0 {
			e.mu.Unlock()
			return ErrOffsetOrder
		}
		if e.resume != nil && e.resume.Contains(r.Offset) {
			e.tr.add(r.Offset, true)
			e.stats.Completed++
			e.mu.Unlock()
			return nil
		}
		if e.hasSpace(size) {
			break
		}
		e.waiters++
		e.mu.Unlock()
		select {
		case <-e.space:
		case <-e.ended:
		case <-ctx.Done():
			e.mu.Lock()
			e.waiters--
			e.mu.Unlock()
			return ctx.Err()
		}
		e.mu.Lock()
		e.waiters--
	}
	if e.waiters > 0 {
		e.notifySpace() // pass the kick on: there may be room for the next waiter too
	}
	it := &item[T]{rec: r, size: size, seq: e.tr.add(r.Offset, false), idx: -1}
	e.records++
	e.bytes += size
	e.queued++
	switch e.cfg.Ordering {
	case OrderUnordered:
		e.pushReady(it)
	case OrderPartition:
		e.enqueueKey(e.serial, it)
	default:
		k := string(r.Key)
		kq := e.keys[k]
		if kq == nil {
			if n := len(e.freeKQ); n > 0 {
				kq = e.freeKQ[n-1]
				e.freeKQ = e.freeKQ[:n-1]
				kq.key = k
			} else {
				kq = &keyQueue[T]{key: k}
			}
			e.keys[k] = kq
		}
		e.enqueueKey(kq, it)
	}
	e.mu.Unlock()
	return nil
}

func (e *Engine[T]) hasSpace(size int64) bool {
	if e.records > 0 && (e.records >= e.cfg.MaxBufferedRecords || e.bytes+size > e.cfg.MaxBufferedBytes) {
		return false
	}
	// Observed-but-untracked span (completed entries behind a stuck watermark) is bounded too.
	if len(e.tr.entries) >= e.cfg.MaxBufferedRecords {
		return false
	}
	return !e.paused()
}

// paused reports the 75 % metadata rule.
func (e *Engine[T]) paused() bool {
	return e.tr.estimate()*4 >= e.cfg.MaxMetadataBytes*3
}

func (e *Engine[T]) enqueueKey(kq *keyQueue[T], it *item[T]) {
	it.kq = kq
	kq.items = append(kq.items, it)
	if len(kq.items) == 1 {
		e.pushReady(it)
	} else {
		e.ready.fix(kq.items[0])
	}
}

func (e *Engine[T]) pushReady(it *item[T]) {
	e.ready.push(it)
	e.work.Signal()
}

func (e *Engine[T]) notifySpace() {
	if e.waiters > 0 {
		select {
		case e.space <- struct{}{}:
		default:
		}
	}
}

// end wakes every blocked Submit for good; the lock is held.
func (e *Engine[T]) end() {
	select {
	case <-e.ended:
	default:
		close(e.ended)
	}
}

// take removes up to BatchSize ready items; under the 75 % rule only the watermark record.
func (e *Engine[T]) take(batch []*item[T]) []*item[T] {
	batch = batch[:0]
	if e.ready.len() == 0 || e.stopErr != nil {
		return nil
	}
	if e.paused() {
		if len(e.tr.entries) == 0 {
			return nil
		}
		if i := e.ready.find(e.tr.headSeq); i >= 0 {
			return append(batch, e.ready.remove(i))
		}
		return nil
	}
	for range min(e.cfg.BatchSize, e.ready.len()) {
		batch = append(batch, e.ready.pop())
	}
	return batch
}

// finished reports whether a worker may exit.
func (e *Engine[T]) finished() bool {
	if e.stopErr != nil || e.abandon {
		return true
	}
	if !e.closing {
		return false
	}
	if e.mode == NoDrain {
		return e.ready.len() == 0
	}
	return e.queued == 0 && e.inFlight == 0
}

func (e *Engine[T]) worker() {
	var recs []Record[T]
	buf := make([]*item[T], 0, e.cfg.BatchSize)
	e.mu.Lock()
	for {
		batch := e.take(buf)
		if batch == nil {
			if e.finished() {
				break
			}
			e.work.Wait()
			continue
		}
		for _, it := range batch {
			if it.attempts == 0 {
				e.queued--
				e.inFlight++
			}
			it.attempts++
		}
		e.running++
		e.mu.Unlock()

		var err error
		recs, err = e.run(batch, recs)
		if err != nil {
			e.failed(batch, err)
		}

		e.mu.Lock()
		e.running--
		if err == nil {
			for _, it := range batch {
				e.complete(it, false)
			}
		}
	}
	e.alive--
	if e.alive == 0 {
		e.cancel()
		close(e.done)
	}
	e.work.Broadcast()
	e.mu.Unlock()
}

// run calls the handler; a panic becomes an error (and is retried like one).
func (e *Engine[T]) run(batch []*item[T], recs []Record[T]) (_ []Record[T], err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", ErrHandlerPanic, p)
			e.cfg.Logger.Error("parallel: handler panic", "offset", batch[0].rec.Offset, "panic", p, "stack", string(debug.Stack()))
		}
	}()
	if e.cfg.Handler != nil {
		return recs, e.cfg.Handler(e.ctx, batch[0].rec)
	}
	recs = recs[:0]
	for _, it := range batch {
		recs = append(recs, it.rec)
	}
	return recs, e.cfg.BatchHandler(e.ctx, recs)
}

// failed handles a failed attempt of batch; called without the lock.
func (e *Engine[T]) failed(batch []*item[T], err error) {
	for _, it := range batch {
		if it.attempts < e.cfg.MaxAttempts && e.ctx.Err() == nil {
			if e.cfg.Hooks.OnRetry != nil {
				e.cfg.Hooks.OnRetry(it.rec.Offset, it.attempts, err)
			}
			e.mu.Lock()
			e.stats.Retried++
			e.scheduleRetry(it, e.cfg.Backoff(it.attempts))
			e.mu.Unlock()
			continue
		}
		if e.cfg.OnFailure == FailSkip && e.ctx.Err() == nil {
			e.cfg.Logger.Warn("parallel: record dead-lettered", "offset", it.rec.Offset, "key", string(it.rec.Key), "attempts", it.attempts, "err", err)
			if e.cfg.DeadLetter != nil {
				e.cfg.DeadLetter(e.ctx, it.rec, err)
			}
			e.mu.Lock()
			e.stats.Failed++
			e.complete(it, true)
			e.mu.Unlock()
			continue
		}
		e.mu.Lock()
		if e.ctx.Err() == nil && e.stopErr == nil {
			e.stats.Failed++
			e.cfg.Logger.Error("parallel: record failed, stopping", "offset", it.rec.Offset, "key", string(it.rec.Key), "attempts", it.attempts, "err", err)
			e.stop(&RecordError{Offset: it.rec.Offset, Key: it.rec.Key, Attempts: it.attempts, Err: err})
		}
		e.mu.Unlock()
	}
}

func (e *Engine[T]) scheduleRetry(it *item[T], d time.Duration) {
	if e.stopErr != nil || e.abandon || (e.closing && e.mode == NoDrain) {
		e.inFlight--
		return
	}
	e.timers[it] = time.AfterFunc(d, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if _, ok := e.timers[it]; !ok {
			return
		}
		delete(e.timers, it)
		e.pushReady(it)
	})
}

// stop ends dispatching after a failure; the lock is held.
func (e *Engine[T]) stop(err error) {
	e.stopErr = err
	e.dropQueued()
	e.cancel()
	e.end()
	e.work.Broadcast()
}

// dropQueued forgets queued records and pending retries; the lock is held. Dropped records
// stay incomplete in the tracker, so the watermark never passes them.
func (e *Engine[T]) dropQueued() {
	for it, t := range e.timers {
		t.Stop()
		delete(e.timers, it)
		e.inFlight--
	}
	e.queued -= e.ready.len()
	e.ready.clear()
}

// complete marks it done; the lock is held.
func (e *Engine[T]) complete(it *item[T], failed bool) {
	if e.abandon {
		return
	}
	e.inFlight--
	e.records--
	e.bytes -= it.size
	if !failed {
		e.stats.Completed++
	}
	e.tr.complete(it.seq)
	if kq := it.kq; kq != nil {
		kq.items[0] = nil
		kq.items = kq.items[1:]
		if len(kq.items) > 0 {
			if e.stopErr == nil && !(e.closing && e.mode == NoDrain) {
				e.pushReady(kq.items[0])
			}
		} else {
			kq.items = kq.items[:0]
			if kq != e.serial {
				delete(e.keys, kq.key)
				if len(e.freeKQ) < 1024 {
					e.freeKQ = append(e.freeKQ, kq)
				}
			}
		}
	}
	if e.cfg.Hooks.OnComplete != nil {
		e.cfg.Hooks.OnComplete(it.rec.Offset, it.attempts, failed)
	}
	e.notifySpace()
	if e.closing || e.tr.estimate() > 0 {
		e.work.Broadcast() // the watermark record may be waiting under the 75 % rule
	}
}

// Progress returns the committable watermark and metadata.
func (e *Engine[T]) Progress() Progress {
	e.mu.Lock()
	c := e.tr.checkpoint()
	e.mu.Unlock()
	return Progress{Watermark: c.Watermark, Metadata: c.Encode(e.cfg.MaxMetadataBytes), Checkpoint: c}
}

// Stats returns a snapshot of counters and gauges.
func (e *Engine[T]) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.stats
	s.InFlight = e.inFlight
	s.Queued = e.queued
	s.Watermark = e.tr.watermark()
	s.MetadataBytes = e.tr.estimate()
	s.Paused = e.paused()
	return s
}

// Err returns the error that stopped the engine (a *RecordError under FailStop), or nil.
func (e *Engine[T]) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stopErr
}

// Done is closed when every worker has exited: after a FailStop failure once the in-flight
// records finished, or at the end of Shutdown.
func (e *Engine[T]) Done() <-chan struct{} { return e.done }

// Shutdown stops intake and waits, per mode, for the queued (Drain) or only the in-flight
// (NoDrain) records. When ctx ends first, handler contexts are cancelled, later completions
// are ignored, and ErrShutdownTimeout is returned without waiting for handlers that ignore
// their context. Progress afterwards is the final checkpoint.
func (e *Engine[T]) Shutdown(ctx context.Context, mode ShutdownMode) error {
	e.mu.Lock()
	if !e.closing {
		e.closing = true
		e.mode = mode
	} else if mode == NoDrain {
		e.mode = NoDrain
	}
	if e.mode == NoDrain {
		e.dropQueued()
		trim := func(kq *keyQueue[T]) {
			if len(kq.items) > 1 {
				e.queued -= len(kq.items) - 1
				clear(kq.items[1:])
				kq.items = kq.items[:1]
			}
		}
		for _, kq := range e.keys {
			trim(kq)
		}
		if e.serial != nil {
			trim(e.serial)
		}
	}
	e.end()
	e.work.Broadcast()
	e.mu.Unlock()
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
	}
	e.mu.Lock()
	e.abandon = true
	e.dropQueued()
	e.cancel()
	e.work.Broadcast()
	e.mu.Unlock()
	return ErrShutdownTimeout
}

// Close is Shutdown(context.Background(), NoDrain).
func (e *Engine[T]) Close() error { return e.Shutdown(context.Background(), NoDrain) }
