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

// startSnapshotLocked starts the snapshot bootstrap of a target in RF under term: a
// recovery fetcher whose first source is the snapshot of the materialized copy at the
// main position x (optionally preceded by resync), then the history and Kafka for what the
// target may lose meanwhile. The snapshot stands for every record up to x; the fetcher
// reads it as the range [x, x] (never empty, even when x is -1: an empty log). s.mu and
// t.mu held: x is the main position and rows the state at x.
func (t *target) startSnapshotLocked(term uint64, resync *statecastv1.ResyncRequired, logStart, x int64) {
	t.recEnd = x
	snap := &snapshotSource{t: t, term: term, resync: resync, rows: t.s.snapshotRows(t.views, logStart), x: x}
	t.s.p.goTracked(func() {
		t.recoveryFetcher(term, x, x, snap, t.historySource(term), t.kafkaSource(term))
	})
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

// resync starts the target over on the same stream when a recovery finds the log start
// moved past the records it needs (a DeleteRecords or retention while the target was
// behind): the target gets ResyncRequired and a snapshot, as admission would give it on
// reconnect. Under the stream lock (the main position) it takes a new term — stale pushes
// of the failed fetcher are dropped — clears both queues and restarts in RF with a snapshot
// bootstrap as of the main position ci; main entries after ci go to its normal queue.
// Batches already sent stay accounted until acknowledged. If the target has been replaced
// or suspended meanwhile, nothing happens.
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
	t.dropped = false
	t.recoveries++
	t.startSnapshotLocked(nterm, rs, logStart, ci)
	t.space.Broadcast()
	t.mu.Unlock()
	s.mu.Unlock()
	s.p.metrics.resyncs.WithLabelValues(s.cfg.Name, rs.GetReason().String()).Inc()
	s.log.Warn("recovery: log start moved past the target's position; resync on the same stream", "target", t.id,
		"from", from, "log_start", logStart, "term", nterm, "snapshot_at", ci)
}
