package player

import (
	"sync"
	"time"
)

// target is one subscriber connection (the paper's target): its queue, ack state and
// recovery bookkeeping. mu guards every field below it; space is signalled when the
// catch-up queue shrinks or the target is suspended.
type target struct {
	s          *stream
	id         string
	views      map[string]bool // nil = all views
	viewList   []string
	maxEntries int
	maxBytes   int64
	budget     int64
	wake       chan struct{} // cap 1: the sender has work (the paper's sendNext)
	done       chan struct{} // closed on suspend
	connected  time.Time

	mu          sync.Mutex
	space       *sync.Cond
	q           *queue
	lastAck     int64 // last_ack of the paper: highest index the client applied
	sentUpTo    int64 // highest index sent (batch, frame or progress)
	recEnd      int64 // the catch-up source covers indexes up to recEnd
	inSnapshot  bool  // between SnapshotBegin and SnapshotEnd on the wire
	caughtUp    bool  // the caught-up progress message was sent (sendLoop)
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
		s: s, id: id, maxEntries: maxEntries, maxBytes: maxBytes, budget: s.p.cfg.TargetBudgetBytes,
		wake: make(chan struct{}, 1), done: make(chan struct{}), connected: time.Now(),
		q: newQueue(term, state), viewList: views,
	}
	if len(views) > 0 {
		t.views = map[string]bool{}
		for _, v := range views {
			t.views[v] = true
		}
	}
	t.space = sync.NewCond(&t.mu)
	t.lastSend = time.Now()
	t.lastAckAt = time.Now()
	return t
}

func (t *target) wants(view string) bool { return t.views == nil || t.views[view] }

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

func (t *target) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// pushMain is the dispatcher's push of a main-stream entry (Algorithm 3 + Algorithm 1
// push with main=true), with the byte budget: called with s.mu held. It reports whether
// the sender should be woken.
func (t *target) pushMain(it *item) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	q := t.q
	if it.index <= t.lastAck || q.state == StateS {
		return false
	}
	if q.state == StateRF && t.dropped {
		t.droppedUpTo = it.index
		return false
	}
	q.push(it, true, q.term)
	if q.normal.bytes <= t.budget/2 {
		return true
	}
	// Over budget: drop the normal queue and continue from Kafka in RF.
	t.overflows++
	t.s.p.metrics.overflows.WithLabelValues(t.s.cfg.Name).Inc()
	q.dropNormal()
	switch q.state {
	case StateRF:
		t.dropped, t.droppedUpTo = true, it.index
		return false
	case StateN:
		t.startRecoveryLocked(t.sentUpTo+1, it.index)
	case StateFC:
		t.startRecoveryLocked(t.recEnd+1, it.index)
	}
	return true
}

// startRecoveryLocked moves the queue to RF and starts a recovery fetcher for [from, to]
// under the queue's term: from the stream's history, else from Kafka. t.mu held.
func (t *target) startRecoveryLocked(from, to int64) {
	t.q.refetch()
	t.recEnd = to
	t.recoveries++
	t.s.p.metrics.recoveries.WithLabelValues(t.s.cfg.Name).Inc()
	term := t.q.term
	t.s.p.goTracked(func() {
		t.recoveryFetcher(term, from, to, t.historySource(term), t.kafkaSource(term))
	})
}

// pushCatchup is a recovery source's push (Algorithm 1 push with main=false). It blocks
// while the catch-up queue is over its share of the budget; it returns false when the
// term expired or the target was suspended (the source must stop). Snapshot rows are
// not filtered by last ack (they carry old indexes by design).
func (t *target) pushCatchup(it *item, term uint64, snapshot bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for {
		if t.q.term != term || t.q.state == StateS || t.q.state != StateRF {
			return false
		}
		if it.frame == nil && !snapshot && (it.index <= t.lastAck || !t.wants(it.view)) {
			return true
		}
		if t.q.catchup.bytes < t.budget/4 {
			t.q.push(it, false, term)
			t.signal()
			return true
		}
		t.space.Wait()
	}
}

// complete is the recovery fetcher's fetchingCompleted. When main entries were dropped
// while in RF it extends the range instead and reports more=true with the new end.
func (t *target) complete(term uint64) (more bool, to int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.q.term != term || t.q.state != StateRF {
		return false, 0
	}
	if t.dropped {
		t.dropped = false
		t.recEnd = t.droppedUpTo
		return true, t.recEnd
	}
	t.q.fetchingCompleted(term)
	t.signal()
	return false, 0
}

// suspend clears the queue and ends the target (health checker, Algorithm 1 suspend).
func (t *target) suspend(err error) bool {
	t.mu.Lock()
	if t.q.state == StateS {
		t.mu.Unlock()
		return false
	}
	t.q.suspend()
	t.err = err
	close(t.done)
	t.space.Broadcast()
	t.mu.Unlock()
	t.signal() // the sender waits on wake only
	t.s.p.metrics.suspensions.WithLabelValues(t.s.cfg.Name).Inc()
	return true
}
