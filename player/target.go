package player

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// A target's life, in the order it happens:
//
//   - admitted (admit.go, stream.admit): registered with the dispatcher under a new term,
//     in N, or in RF with a recovery fetcher (recovery.go) or a snapshot bootstrap;
//   - served (serve): the handler goroutine waits for the end, a receiver goroutine reads
//     the acks (receive), a sender writes while there is something to send (signal starts
//     one: drain, sendReady) and the stream's progress loop checks its health; meanwhile the
//     dispatcher pushes main entries (pushMain, dispatch.go: past the byte budget the
//     target goes back to RF) and recovery fetchers push catch-up entries (recovery.go);
//     a recovery that finds the log start moved past it resyncs the target on the same
//     stream (admit.go, target.resync);
//   - suspended (suspend): on a stream error, an ack time-out, a replacement or Close;
//     the handler returns and the stream unregisters it.

// target is one subscriber connection (the paper's target): its queue, ack state and
// recovery bookkeeping. mu guards every field below it; space is signalled when the
// catch-up queue shrinks or the target is suspended.
type target struct {
	s          *stream
	id         string       // the instance id (Hello.client_id)
	key        string       // in the stream's maps: identity.key (admit), else id
	service    string       // the metrics' label
	principal  Principal    // who it authenticated as
	views      viewSet      // nil = all views
	sels       []*selection // the selected views (nil: none); fixed at admission
	viewList   []string     // as the Hello listed them
	topic      []byte       // the topic ID its frames carry (nil: unknown); fixed at admission
	maxEntries int
	maxBytes   int64
	budget     int64
	done       chan struct{} // closed on suspend
	connected  time.Time
	// sendingSince is when the SendMsg in progress started (Unix ns; 0: none). A send
	// blocks while the client does not read (flow control): the health check times it out
	// like an unacknowledged batch, which also covers the snapshot's frames, never acked.
	sendingSince atomic.Int64
	// The sender (signal, drain): srv is set once by startSending, before serving: the
	// Subscribe stream, or the target's channel of a SubscribeMany stream (manyChan).
	srv     frameSender
	serving atomic.Bool // signal may start senders
	stopped atomic.Bool // suspended: signal starts nothing
	sending atomic.Bool // a sender runs
	pending atomic.Bool // signalled since the running sender last looked

	mu    sync.Mutex
	space *sync.Cond
	// onEnd, when set (whenEnded), is called once by suspend, outside t.mu: a
	// SubscribeMany stream's channels have no goroutine of their own waiting for done.
	onEnd    func()
	q        *queue
	lastAck  int64 // last_ack of the paper: highest index the client applied
	sentUpTo int64 // highest index sent (batch, frame or progress)
	recEnd   int64 // the recovery fetcher covers indexes up to recEnd
	// recSeen: the keys of selected views a recovery delivered, and whether the target
	// holds each after it (chooseCatchup); cleared when a recovery starts.
	recSeen     map[string]bool
	inSnapshot  bool  // between SnapshotBegin and SnapshotEnd on the wire
	caughtUp    bool  // the caught-up progress message was sent (sendReady)
	dropped     bool  // RF only: the normal queue overflowed; main entries are skipped
	droppedUpTo int64 // highest main index skipped while dropped
	lastSend    time.Time
	lastAckAt   time.Time
	err         error // why it was suspended
	recoveries  int
	overflows   int
}

func newTarget(s *stream, id string, views []string, term uint64, state State, maxEntries int, maxBytes int64) *target {
	t := &target{
		s: s, id: id, key: id, service: id, maxEntries: maxEntries, maxBytes: maxBytes, budget: s.p.cfg.TargetBudgetBytes,
		done: make(chan struct{}), connected: time.Now(),
		q: newQueue(term, state), viewList: views, topic: s.topic, // s.mu held by admit
	}
	if len(views) > 0 {
		t.views = views
	}
	t.space = sync.NewCond(&t.mu)
	t.lastSend = time.Now()
	t.lastAckAt = time.Now()
	return t
}

// wants reports whether the target receives it: an entry of one of its views, or a
// position entry (those belong to the stream: every target gets them, so that each one
// knows where source transactions end and what the source position is).
func (t *target) wants(it *item) bool {
	return t.views == nil || t.views.has(it.view) || it.isPosition()
}

// signal wakes the sender (the paper's sendNext); it never blocks. No goroutine of the
// target waits for work: signal starts a sender (drain) when none runs, and a running one
// sees pending and looks again before it ends. Before startSending it only leaves pending
// set; once the target is suspended it starts nothing. Its callers are goroutines Close
// waits for (the fetchers, recovery fetchers, receivers, the progress loop) or the
// target's own handler, so the sender it starts may join p's wait group.
func (t *target) signal() {
	t.pending.Store(true)
	if !t.serving.Load() || t.stopped.Load() {
		return
	}
	if t.sending.CompareAndSwap(false, true) {
		t.s.p.goTracked(t.drain)
	}
}

// drain is a sender: it sends what is ready (sendReady) and ends, unless it was signalled
// meanwhile. A failed send suspends the target (sendReady then finds nothing to do, and no
// sender starts after that).
func (t *target) drain() {
	for {
		t.pending.Store(false)
		if err := t.sendReady(); err != nil {
			t.suspend(err)
		}
		t.sending.Store(false)
		if !t.pending.Load() || !t.sending.CompareAndSwap(false, true) {
			return
		}
	}
}

// serve runs the admitted target on srv until it is suspended, and returns why. It starts
// the receiver (receive) in a goroutine of its own and lets signal start senders (drain);
// the calling goroutine, the Subscribe handler's, waits for the end: of the target (its
// health is checked by the stream's progress loop), of the stream or of the player.
// Returning from the handler cancels the stream's context, which unblocks a Send or Recv
// stuck on a dead or stalled client.
func (t *target) serve(srv statecastv1.Player_SubscribeServer) error {
	p := t.s.p
	t.startSending(srv)
	p.goTracked(func() { t.receive(srv) })
	select {
	case <-t.done:
	case <-srv.Context().Done():
		t.suspend(fmt.Errorf("%w: %v", ErrSuspended, srv.Context().Err()))
	case <-p.ctx.Done():
		t.suspend(ErrClosed)
	}
	t.mu.Lock()
	err := t.err
	t.mu.Unlock()
	t.s.log.Info("target ended", "target", t.id, "err", err)
	return err
}

// startSending lets signal start senders on srv, and starts one: a target admitted in N
// owes its client the caught-up progress message, and signals that came before (the
// dispatcher may push as soon as the target is registered) are pending.
func (t *target) startSending(srv frameSender) {
	t.srv = srv
	t.serving.Store(true)
	t.signal()
}

// healthCheck reports an ack time-out: batches sent more than AckTimeout ago are still
// unacknowledged and no ack came for AckTimeout, or a send has been blocked for
// AckTimeout (the client stopped reading, in a snapshot too).
func (t *target) healthCheck(now time.Time) error {
	timeout := t.s.p.cfg.AckTimeout
	if since := t.sendingSince.Load(); since != 0 && now.Sub(time.Unix(0, since)) > timeout {
		return fmt.Errorf("%w: %w for %s: the client is not reading", ErrAckTimeout, errSendBlocked, timeout)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.q.popped) > 0 && now.Sub(t.q.popped[0].sentAt) > timeout && now.Sub(t.lastAckAt) > timeout {
		return fmt.Errorf("%w: no ack for %s", ErrAckTimeout, timeout)
	}
	return nil
}

// receive is the receiver goroutine (Algorithm 4, read completions): it reads acks until
// the stream fails, updating last_ack and releasing the popped batches they cover.
func (t *target) receive(srv statecastv1.Player_SubscribeServer) {
	for {
		req, err := srv.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: client closed its send side", ErrSuspended)
			}
			t.suspend(err)
			return
		}
		if err := t.onRequest(req); err != nil {
			t.suspend(err)
			return
		}
	}
}

// onRequest handles what the client sent after its Hello: an ack updates last_ack and
// releases the popped batches it covers. An error ends the target.
func (t *target) onRequest(req *statecastv1.SubscribeRequest) error {
	ack := req.GetAck()
	if ack == nil {
		return fmt.Errorf("%w: only Acks may follow Hello", ErrBadHello)
	}
	t.mu.Lock()
	if ack.GetIndex() > t.sentUpTo {
		err := fmt.Errorf("%w: ack %d above the highest index sent %d", ErrBadAck, ack.GetIndex(), t.sentUpTo)
		t.mu.Unlock()
		return err
	}
	if ack.GetIndex() > t.lastAck {
		t.lastAck = ack.GetIndex()
	}
	t.lastAckAt = time.Now()
	// The sender waits for an ack only when its send window is full (sendReady checks
	// it under t.mu, as here): wake it only when this ack opens the window, not for
	// every ack (that was one useless sender wake-up per frame per target).
	full := t.q.poppedBytes >= t.budget/4
	t.q.ack(ack.GetIndex())
	opened := full && t.q.poppedBytes < t.budget/4
	t.mu.Unlock()
	if opened {
		t.signal()
	}
	return nil
}

// batches holds the senders' batch slices between their runs: an idle target keeps none.
var batches = sync.Pool{New: func() any { return new([]*item) }}

// sendReady is the sender's work (the paper's sendNext; one write at a time, which is
// what write_status ensured, since one sender runs at a time): batches from the queue
// (Algorithm 2), a send window (unacked bytes) of a quarter of the budget, and progress
// messages when idle. It returns nil when nothing is left to send, the window is full or
// the target is suspended, and the stream's error when a send fails.
func (t *target) sendReady() error {
	srv := t.srv
	bp := batches.Get().(*[]*item)
	defer batches.Put(bp)
	batch := (*bp)[:0]
	defer func() { *bp = batch[:0] }()
	for {
		ci := t.s.current.Load()
		now := time.Now()
		t.mu.Lock()
		q := t.q
		if q.state == StateS {
			t.mu.Unlock()
			return nil
		}
		if q.poppedBytes >= t.budget/4 {
			t.mu.Unlock()
			return nil // send window full: an ack that opens it signals
		}
		wasCatchup := q.state != StateN
		batch = q.nextBatch(t.maxEntries, t.maxBytes, batch, now)
		var out any
		if len(batch) > 0 {
			for _, it := range batch {
				if it.index > t.sentUpTo {
					t.sentUpTo = it.index
				}
			}
			// Nothing is acked inside a snapshot (the client acks X after SnapshotEnd):
			// its batches are not tracked (their rows are shared with the materialized
			// copy), so neither the send window nor the ack time-out can stall it.
			f := batch[0].frame
			if f.GetSnapshotBegin() != nil {
				t.inSnapshot = true
			}
			if (t.inSnapshot && f.GetSnapshotEnd() == nil) || (f != nil && batch[0].index < 0) {
				q.untrackLast()
			}
			if f.GetSnapshotEnd() != nil {
				t.inSnapshot = false
			}
			if wasCatchup {
				t.space.Broadcast()
			}
		} else if t.owesProgressLocked(now, ci) {
			// A progress message when idle, and once as soon as the target has caught
			// up (N, nothing queued): a client that resumed at the head learns at once
			// that it is current instead of waiting for the next record.
			t.caughtUp = true
			t.sentUpTo = max(ci, t.sentUpTo)
			out = rawFrame(encodeProgress(t.sentUpTo, t.topic))
		}
		if out == nil && len(batch) == 0 {
			t.mu.Unlock()
			return nil
		}
		t.lastSend = now
		head := max(ci, t.sentUpTo) // the batch may hold entries dispatched after ci was read
		t.mu.Unlock()
		if len(batch) > 0 {
			out = withHead(batchParts(t.visibleTo(batch)), head) // items are immutable: framed outside the lock, not copied
		} else {
			out = withHead(append(make(rawParts, 0, 2), out.(rawFrame)), head)
		}
		t.sendingSince.Store(now.UnixNano())
		err := srv.SendMsg(out)
		t.sendingSince.Store(0)
		if err != nil {
			clear(batch) // the pooled slice keeps no item alive
			return err
		}
		sent := time.Now()
		for _, it := range batch {
			if it.dispatched != 0 {
				t.s.delay.Observe(float64(sent.UnixNano()-it.dispatched) / 1e9)
			}
		}
		clear(batch)
	}
}

// owesProgressLocked reports whether the target is owed a Progress message: it is in N
// with nothing queued and either has not been told it caught up, or was sent nothing for
// ProgressInterval while the main position ci moved past what it was sent. t.mu held.
func (t *target) owesProgressLocked(now time.Time, ci int64) bool {
	return t.q.state == StateN && t.q.normal.len() == 0 &&
		(!t.caughtUp || ci > t.sentUpTo && now.Sub(t.lastSend) >= t.s.p.cfg.ProgressInterval)
}

// progressDue reports whether the stream's progress loop should wake the sender: a
// Progress message is owed, or — a safety net, never the normal path, since a signal
// would already have started it — the sender, idle for ProgressInterval, has something
// to send within its window.
func (t *target) progressDue(now time.Time, ci int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.owesProgressLocked(now, ci) {
		return true
	}
	return now.Sub(t.lastSend) >= t.s.p.cfg.ProgressInterval && t.q.front() != nil && t.q.poppedBytes < t.budget/4
}

// suspend ends the target (Algorithm 1 suspend, called by the health check of the stream's
// progress loop, the handler, the sender or receiver when the stream fails, a replacement, Close or a failed recovery): the queue
// is cleared and moves to S under a new term, done is closed. It reports whether this call
// suspended it (false: it already was).
func (t *target) suspend(err error) bool {
	t.mu.Lock()
	if t.q.state == StateS {
		t.mu.Unlock()
		return false
	}
	t.q.suspend()
	t.err = err
	close(t.done)
	t.stopped.Store(true)
	t.space.Broadcast()
	onEnd := t.onEnd
	t.mu.Unlock()
	t.s.p.metrics.suspensions.WithLabelValues(t.s.cfg.Name).Inc()
	if onEnd != nil {
		onEnd()
	}
	return true
}

// whenEnded makes suspend call f (once, outside t.mu), or calls it now if the target has
// already been suspended.
func (t *target) whenEnded(f func()) {
	t.mu.Lock()
	if t.q.state == StateS {
		t.mu.Unlock()
		f()
		return
	}
	t.onEnd = f
	t.mu.Unlock()
}

// viewSet is a target's views, few: a slice costs a fraction of a map's memory, which
// every target of a SubscribeMany stream pays, and a scan of a few names is as quick as
// a lookup.
type viewSet []string

func (vs viewSet) has(v string) bool { return slices.Contains(vs, v) }

// frameSender is where a target's frames go: its Subscribe stream, or its channel of a
// SubscribeMany stream. SendMsg is given rawParts (a marshalled SubscribeResponse).
type frameSender interface {
	SendMsg(m any) error
}

// fail suspends the target with err if term is still current (a recovery fetcher's
// failure; a stale one has nothing to end).
func (t *target) fail(term uint64, err error) {
	t.mu.Lock()
	cur := t.q.term == term
	t.mu.Unlock()
	if cur {
		t.s.log.Warn("recovery failed", "target", t.id, "err", err)
		t.suspend(err)
	}
}
