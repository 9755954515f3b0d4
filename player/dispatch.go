package player

// pushMain is the dispatcher's push of a main-stream entry to one target (Algorithm 3 +
// Algorithm 1 push with main=true; stream.apply calls it for every subscribed target),
// with the byte budget: past half of it the normal queue is dropped and the target
// continues in RF from a recovery fetcher (the stream's history, else Kafka), without
// being disconnected. Called with s.mu held. It
// reports whether the sender should be woken.
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
	// Over budget: drop the normal queue and recover what it held. In RF the running
	// recovery fetcher extends its range to droppedUpTo when it completes (complete).
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
