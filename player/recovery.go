package player

import (
	"errors"
	"fmt"

	"github.com/statecast/statecast/schemas/gen/statecast/v1"
)

// A source is where a recovery fetcher reads the log from (Algorithm 5's recovery stream):
// the materialized copy (snapshotSource), the stream's history of recent records
// (historySource) or Kafka (kafkaSource). A source belongs to one recovery fetcher: only
// its goroutine calls read and close, for one target and one term.
type source interface {
	// read pushes the target's records of [from, to] into its catch-up queue
	// (target.pushCatchup), in index order, and returns the index it stopped at: to+1
	// when the range is covered (err nil; indexes have gaps: a source knows it is done
	// when it sees an index >= to, or knows that none exists, never by counting). Else
	// it stops early with next <= to and err: errNotHere (the records from next on are
	// not in this source: read the next one), errStopped (the term expired or the
	// target was suspended: stop quietly), errLogStartMoved (next is below the log
	// start), or another error (the recovery fails). Calls are contiguous: each starts
	// at the previous call's next, with a to that never decreases.
	read(from, to int64) (next int64, err error)
	// close releases what read opened. It is called once, after the last read.
	close()
}

var (
	errNotHere       = errors.New("player: not in this recovery source")
	errStopped       = errors.New("player: recovery stopped")
	errLogStartMoved = errors.New("player: the log start moved past the recovery")
)

// recoveryFetcher is the recovery fetcher of Algorithm 5: it reads [from, to] from srcs,
// in turn (each from where the previous one had nothing), into the catch-up queue under
// term, then calls fetching-completed (complete). While the target was in RF its main
// entries may have been dropped (byte budget): complete then extends the range to the
// last entry dropped instead, and the fetcher goes on reading. A log start that moved
// past the range resyncs the target; any other failure suspends it.
func (t *target) recoveryFetcher(term uint64, from, to int64, srcs ...source) {
	for _, src := range srcs {
		defer src.close()
	}
	for {
		for from <= to {
			next, err := srcs[0].read(from, to)
			from = next
			switch {
			case err == nil:
			case errors.Is(err, errNotHere) && len(srcs) > 1:
				srcs = srcs[1:]
			case errors.Is(err, errStopped):
				return
			case errors.Is(err, errLogStartMoved):
				t.resync(term, from)
				return
			default:
				t.fail(term, err)
				return
			}
		}
		more, nto := t.complete(term)
		if !more {
			return
		}
		to = nto
	}
}

// startRecoveryLocked moves the queue to RF and starts a recovery fetcher for [from, to]
// under the queue's term: from the stream's history, else from Kafka. t.mu held.
func (t *target) startRecoveryLocked(from, to int64) {
	t.q.refetch()
	t.recEnd = to
	t.recSeen = nil
	t.recoveries++
	t.s.p.metrics.recoveries.WithLabelValues(t.s.cfg.Name).Inc()
	term := t.q.term
	t.s.p.goTracked(func() {
		t.recoveryFetcher(term, from, to, t.historySource(term), t.kafkaSource(term))
	})
}

// startSnapshotLocked starts the snapshot bootstrap of a target in RF under term: a
// recovery fetcher whose first source is the snapshot of the materialized copy at the
// main position x (optionally preceded by resync), then the history and Kafka for what the
// target may lose meanwhile. The snapshot stands for every record up to x; the fetcher
// reads it as the range [x, x] (never empty, even when x is -1: an empty log). s.mu and
// t.mu held: x is the main position and rows the state at x. It fails with
// ErrSnapshotBudget, starting nothing, when the rows do not fit in what pending
// snapshots may pin.
func (t *target) startSnapshotLocked(term uint64, resync *statecastv1.ResyncRequired, logStart, x int64) error {
	rows := t.s.snapshotItems(t.views, logStart, t.shardKeep)
	size := rows.bytes
	if !t.s.p.pinSnapshot(size) {
		return fmt.Errorf("%w: a snapshot of %d bytes; pending snapshots pin %d of %d (max_snapshot_bytes)",
			ErrSnapshotBudget, size, t.s.p.snapPinned.Load(), t.s.p.cfg.MaxSnapshotBytes)
	}
	t.recEnd = x
	t.recSeen = nil
	snap := &snapshotSource{t: t, term: term, resync: resync, rows: rows, pinned: size, x: x}
	t.s.p.goTracked(func() {
		t.recoveryFetcher(term, x, x, snap, t.historySource(term), t.kafkaSource(term))
	})
	return nil
}

// pinSnapshot reserves n bytes of what pending snapshots may pin (MaxSnapshotBytes); a
// snapshot is always admitted when none is pending, so that one larger than the bound
// still gets served. unpinSnapshot releases them as the rows are pushed.
func (p *Player) pinSnapshot(n int64) bool {
	for {
		cur := p.snapPinned.Load()
		if cur > 0 && cur+n > p.cfg.MaxSnapshotBytes {
			return false
		}
		if p.snapPinned.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

func (p *Player) unpinSnapshot(n int64) { p.snapPinned.Add(-n) }

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
		if it.frame == nil && !snapshot && (it.index <= t.lastAck || !t.wants(it)) {
			return true
		}
		if it.frame == nil && t.sels != nil && skipsEpochEnd(t, it) {
			return true
		}
		if it.frame == nil && it.isRow() {
			if sel := t.selectionOf(it.view); sel != nil {
				if snapshot {
					// A snapshot replaces the target's state: only the rows that pass.
					r := &rowVals{it: it}
					if !sel.passes(r) {
						return true
					}
					it = r.projected(sel)
				} else if it = t.chooseCatchup(sel, it); it == nil {
					return true
				}
			}
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
	t.recSeen = nil
	t.signal()
	return false, 0
}
