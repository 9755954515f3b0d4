package player

import statecastv1 "github.com/statecast/statecast/schemas/gen/statecast/v1"

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

// dispatch is the push of one entry of a view to the targets that subscribe to it
// (stream.apply): a target that selects rows of the view gets what its selection
// chooses, the row decoded once for all of them (cur, and prev: the key's row before
// it, nil when it had none).
type dispatch struct {
	it    *item
	cur   rowVals
	prev  *rowVals
	woken map[*target]struct{}
}

func (d *dispatch) push(t *target) {
	x := d.it
	if t.sels != nil && skipsEpochEnd(t, x) {
		return
	}
	if d.cur.it != nil {
		if sel := t.selectionOf(d.it.view); sel != nil {
			if x = sel.choose(&d.cur, func() bool { return d.prev != nil && sel.passes(d.prev) }); x == nil {
				return
			}
		}
	}
	if t.pushMain(x) {
		d.woken[t] = struct{}{}
	}
}

// skipsEpochEnd reports whether it is an epoch-end record of a view the target selects:
// its count and hash describe the whole view, which the target does not hold, and a
// client that checks it (every cacheclient before selections, under a grant's filter)
// would resync forever.
func skipsEpochEnd(t *target, it *item) bool {
	return it.kind == statecastv1.Kind_KIND_EPOCH_END && t.selectionOf(it.view) != nil
}
