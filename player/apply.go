package player

import (
	"cmp"
	"slices"
	"time"

	"github.com/IBM/sarama"

	"github.com/statecast/statecast/schemas/record"
)

// The main fetcher's side of a stream: each record applied to the materialized copy and,
// when live, dispatched to the targets (Algorithm 3); the timeline of log times that the
// tombstone horizon is checked against; a snapshot's rows taken from the copy.

// apply materializes m and, when live, dispatches it (Algorithm 3); the targets to wake
// are added to woken.
func (s *stream) apply(m *sarama.ConsumerMessage, live bool, woken map[*target]struct{}) {
	it := itemOf(m)
	if why := poison(it, s.p.cfg.MaxRecordBytes); why != "" {
		key := it.key
		if len(key) > 256 {
			key = key[:256] + "…"
		}
		s.log.Error("record skipped: never served to clients", "offset", m.Offset, "key", key, "view", it.view,
			"reason", why, "bytes", len(it.single), "max_record_bytes", s.p.cfg.MaxRecordBytes)
		s.p.metrics.skipped.WithLabelValues(s.cfg.Name, why).Inc()
		s.mu.Lock()
		s.sample(m.Offset, m.Timestamp)
		s.current.Store(m.Offset)
		s.mu.Unlock()
		return
	}
	s.mu.Lock()
	if it.view != "" && !s.known[it.view] {
		s.known[it.view] = true
	}
	var prev *item // the key's row before it (the selections' moves out)
	if it.isRow() {
		rs := s.rows[it.view]
		if live && s.sidx[it.view] != nil && rs != nil {
			prev = rs.get(it.key)
		}
		if it.tombstone {
			if rs != nil && rs.remove(it.key) {
				s.nrows--
			}
		} else {
			if rs == nil {
				rs = newRowStore(it.view)
				s.rows[it.view] = rs
			}
			if rs.put(it) {
				s.nrows++
			}
		}
	}
	if it.isPosition() {
		// Compaction keeps one position record (one key): the copy keeps the latest, which
		// every snapshot carries, so that a new target knows the source position of its
		// state and whether a source transaction is open at the snapshot's index.
		s.position, s.posLSN = it, ""
		if p, err := record.ParsePosition(m.Value); err == nil {
			s.posLSN = p.LSN
		}
	}
	s.sample(m.Offset, m.Timestamp)
	s.hist.add(it)
	if live {
		it.dispatched = time.Now().UnixNano()
		if it.isPosition() {
			// Every target, whatever its views (byClient holds each registered target once).
			for _, t := range s.byClient {
				if t.pushMain(it) {
					woken[t] = struct{}{}
				}
			}
		} else {
			d := dispatch{it: it, woken: woken}
			if it.isRow() {
				d.cur.it = it
				if prev != nil {
					d.prev = &rowVals{it: prev}
				}
			}
			for t := range s.byView[it.view] {
				d.push(t)
			}
			if x := s.sidx[it.view]; x != nil {
				// Selecting targets: a row change only to those the index can't rule out.
				if it.isRow() {
					x.candidates(&d.cur, d.prev, d.push)
				} else {
					for t := range x.all {
						d.push(t)
					}
				}
			}
			for t := range s.allViews {
				d.push(t)
			}
		}
	}
	s.current.Store(m.Offset)
	s.mu.Unlock()
	if live && s.p.dispatchHook != nil {
		s.p.dispatchHook(s.cfg.Name, it.index, time.Unix(0, it.dispatched))
	}
}

// firstAfterTime returns a lower bound of the append time of the first record after index
// r, and false when no record after r has been read. Tombstones after r are at least that
// old, so if the bound is within the tombstone horizon none of them can have been removed.
// The timeline samples a record when its time is >= 1s after the last sample's (record
// times are assumed non-decreasing, as with one producer or LogAppendTime): either the
// first sample after r is that record (its predecessor is <= r: exact), or the record lies
// between the last sample <= r and the next sample, hence at least as old as the former
// and less than 1s younger. s.mu must be held.
func (s *stream) firstAfterTime(r int64) (time.Time, bool) {
	if r >= s.current.Load() {
		return time.Time{}, false
	}
	i, _ := slices.BinarySearchFunc(s.timeline, r+1, func(m tsMark, x int64) int { return cmp.Compare(m.off, x) })
	if i < len(s.timeline) && s.timeline[i].prev <= r {
		return s.timeline[i].ts, true
	}
	if i > 0 {
		return s.timeline[i-1].ts, true
	}
	return time.Time{}, false
}

// sample adds the record (off, ts) to the timeline when needed (see firstAfterTime).
// s.mu held.
func (s *stream) sample(off int64, ts time.Time) {
	n := len(s.timeline)
	if n == 0 || ts.Sub(s.timeline[n-1].ts) >= time.Second {
		s.timeline = append(s.timeline, tsMark{off: off, prev: s.lastOff, ts: ts})
	}
	s.lastLog, s.lastOff = ts, off
}

// snapshotRows references the current rows of views (nil = all) whose index is >= from,
// in increasing index order (a walk of each view's arena, merged by index: no sort); of a
// view for which keep (when set) gives a test, only the rows whose key hash passes it (a
// shard: target.shardKeep). s.mu must be held, so the rows are the state at s.current.
func (s *stream) snapshotRows(views viewSet, from int64, keep func(view string) func(hash uint64) bool) *snapRows {
	var stores []*rowStore
	var keeps []func(uint64) bool
	for v, rs := range s.rows {
		if views == nil || views.has(v) {
			stores = append(stores, rs)
			if keep != nil {
				keeps = append(keeps, keep(v))
			}
		}
	}
	return collectRows(stores, keeps, from)
}

// snapshotItems is snapshotRows plus the latest position record when its index is >= from,
// at its place in index order: a snapshot's content for a target. s.mu must be held.
func (s *stream) snapshotItems(views viewSet, from int64, keep func(view string) func(hash uint64) bool) *snapRows {
	rows := s.snapshotRows(views, from, keep)
	rows.withPosition(s.position, from)
	return rows
}
