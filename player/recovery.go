package player

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// kafkaSource is a recovery fetcher (Algorithm 5): it reads [from, to] of the log into
// the target's catch-up queue under term, then calls fetching-completed. The range may be
// extended by complete when the target's main entries were dropped meanwhile. Indexes
// have gaps: the fetcher is done when it has seen an offset >= to, never by counting.
func (t *target) kafkaSource(term uint64, from, to int64) {
	for from > to {
		more, nto := t.complete(term)
		if !more {
			return
		}
		to = nto
	}
	s := t.s
	consumer, err := sarama.NewConsumerFromClient(s.recClient)
	if err != nil {
		t.fail(term, fmt.Errorf("%w: recovery: %v", ErrStreamUnavailable, err))
		return
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(s.cfg.Topic, 0, from)
	if err != nil {
		if errors.Is(err, sarama.ErrOffsetOutOfRange) {
			t.resync(term, from)
			return
		}
		t.fail(term, fmt.Errorf("%w: recovery: %v", ErrStreamUnavailable, err))
		return
	}
	defer pc.AsyncClose()
	s.log.Debug("recovery fetcher started", "target", t.id, "from", from, "to", to, "term", term)
	for {
		select {
		case <-t.done:
			return
		case <-s.p.ctx.Done():
			return
		case e := <-pc.Errors():
			if errors.Is(e.Err, sarama.ErrOffsetOutOfRange) {
				t.resync(term, from)
				return
			}
			t.fail(term, fmt.Errorf("%w: recovery: %v", ErrStreamUnavailable, e.Err))
			return
		case m := <-pc.Messages():
			for m.Offset > to {
				more, nto := t.complete(term)
				if !more {
					return
				}
				to = nto
			}
			if !t.pushCatchup(itemOf(m), term, false) {
				return
			}
			if m.Offset == to {
				more, nto := t.complete(term)
				if !more {
					return
				}
				to = nto
			}
		}
	}
}

// fail suspends the target if term is still current.
func (t *target) fail(term uint64, err error) {
	t.mu.Lock()
	cur := t.q.term == term
	t.mu.Unlock()
	if cur {
		t.s.log.Warn("recovery failed", "target", t.id, "err", err)
		t.suspend(err)
	}
}

// resync is what a recovery does when the log start moved past the records it needs (a
// DeleteRecords or retention while the target was behind): on the same stream, the target
// gets ResyncRequired and a snapshot, as at admission. Under the stream lock (the main
// position) it takes a new term — stale pushes of the failed source are dropped — clears
// both queues and restarts in RF with a snapshot source as of the main position ci; main
// entries after ci go to its normal queue. Batches already sent stay accounted until
// acknowledged. If the target has been replaced or suspended meanwhile, nothing happens.
func (t *target) resync(term uint64, from int64) {
	s := t.s
	logStart, _, err := s.offsets()
	if err != nil {
		t.fail(term, fmt.Errorf("%w: recovery from %d: log start moved past it, and %v", ErrStreamUnavailable, from, err))
		return
	}
	rs := &statecastv1.ResyncRequired{Reason: statecastv1.ResyncRequired_REASON_BELOW_LOG_START, LogStart: logStart,
		Detail: fmt.Sprintf("recovery from index %d: the log now starts at %d", from, logStart)}
	s.mu.Lock()
	t.mu.Lock()
	if t.q.term != term || t.q.state != StateRF || s.byClient[t.id] != t {
		t.mu.Unlock()
		s.mu.Unlock()
		return
	}
	if t.inSnapshot {
		// The client is inside a snapshot whose end is still queued: a resync frame there
		// breaks the protocol. End the stream instead; the reconnect gets the resync.
		t.mu.Unlock()
		s.mu.Unlock()
		t.fail(term, fmt.Errorf("%w: recovery from %d: log start moved past it during a snapshot; reconnect to resync", ErrStreamUnavailable, from))
		return
	}
	s.terms[t.id]++
	nterm := s.terms[t.id]
	t.q.restart(nterm)
	ci := s.current.Load()
	t.recEnd, t.dropped = ci, false
	t.recoveries++
	rows := s.snapshotRows(t.views, logStart)
	t.space.Broadcast()
	t.mu.Unlock()
	s.mu.Unlock()
	s.p.metrics.resyncs.WithLabelValues(s.cfg.Name, rs.GetReason().String()).Inc()
	s.log.Warn("recovery: log start moved past the target's position; resync on the same stream", "target", t.id,
		"from", from, "log_start", logStart, "term", nterm, "snapshot_at", ci)
	s.p.goTracked(func() { t.snapshotSource(nterm, rs, rows, ci) })
}

// snapshotSource pushes the snapshot bootstrap (optionally preceded by a resync frame)
// into the catch-up queue: SnapshotBegin X, the rows, SnapshotEnd X; then
// fetching-completed (or a Kafka recovery from X+1 if main entries were dropped). rows are
// stream.snapshotRows at X: already in index order, without the rows below the current
// log start (deleted from the log by DeleteRecords or retention: the snapshot shows the
// log as it is).
func (t *target) snapshotSource(term uint64, resync *statecastv1.ResyncRequired, rows []*item, x int64) {
	if resync != nil {
		if !t.pushCatchup(frameItem(-1, &statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_ResyncRequired{ResyncRequired: resync}}), term, true) {
			return
		}
	}
	begin := frameItem(-1, &statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotBegin{SnapshotBegin: &statecastv1.SnapshotBegin{Index: x, Views: t.viewList}}})
	if !t.pushCatchup(begin, term, true) {
		return
	}
	for _, r := range rows {
		if !t.pushCatchup(r, term, true) {
			return
		}
	}
	end := frameItem(x, &statecastv1.SubscribeResponse{Msg: &statecastv1.SubscribeResponse_SnapshotEnd{SnapshotEnd: &statecastv1.SnapshotEnd{Index: x}}})
	if !t.pushCatchup(end, term, true) {
		return
	}
	more, to := t.complete(term)
	if more {
		t.memorySource(term, x+1, to)
	}
}
