package distributor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/statecast/statecast/distributor/internal/capture"
	"github.com/statecast/statecast/schemas/record"
)

// A cycle publishes, as one source transaction, the effect of a prefix of the WAL's
// commits on every view:
//
//  1. take a snapshot (REPEATABLE READ) and learn which transactions it shows;
//  2. wait until the slot has streamed everything the snapshot can show, and keep the
//     received transactions it shows — they must be a prefix of the commit order, else a
//     new snapshot is taken (a commit may become visible an instant before an earlier one);
//  3. lock the views' tables, and take another snapshot if one was truncated since this
//     one was taken (capture.LockTables: a TRUNCATE is not MVCC-safe);
//  4. re-read in the snapshot the view rows those transactions touched (wal_view.go), or
//     whole views (the first cycle, reconciles, tables a view cannot map, truncates); when
//     a backlog streams in, the rows of the transactions received so far are read while
//     the rest arrives (takeReading), so the re-read overlaps the receipt; a view whose
//     changes reach a large share of its rows is read whole and streamed to the producer
//     as it is read (wal_bulk.go);
//  5. publish what changed and a position record: every commit up to the position is in
//     the stream, because the snapshot is exactly the database after that prefix;
//  6. once the broker acknowledged it, confirm the position to the slot.
//
// Re-reading in the snapshot rather than applying the changed tuples is what lets a view
// be any query: the snapshot is the state the view's SQL runs on.

// errNoPrefix: the snapshot shows a commit after one it does not show.
var errNoPrefix = errors.New("distributor: the snapshot shows no prefix of the commits; taking another")

// runCycle runs cycles until one publishes (a snapshot without a prefix, or whose reads met
// a lock waiting for it, is retried at once).
// first, when set, is the snapshot of the session's first cycle.
func (w *walSession) runCycle(ctx context.Context, first *capture.Snapshot) error {
	for attempt := 0; ; attempt++ {
		snap := first
		first = nil
		if snap == nil {
			var err error
			if snap, err = capture.BeginSnapshot(ctx, w.s.pool, w.s.cfg.ReadSettings); err != nil {
				return err
			}
		}
		err := w.cycle(ctx, snap)
		snap.Close(ctx)
		if errors.Is(err, errCycleAgain) {
			continue
		}
		if !(errors.Is(err, errNoPrefix) || errors.Is(err, errLockWait) || errors.Is(err, capture.ErrRewritten)) || attempt >= 100 {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

// cycle runs one cycle in snap.
func (w *walSession) cycle(ctx context.Context, snap *capture.Snapshot) error {
	s := w.s
	start := time.Now()
	reads := map[*walView]*mappedRead{}
	through, readTo, early, err := w.takeReading(ctx, snap, reads)
	if err != nil {
		return err
	}
	taken := time.Now()
	shown, rest, ok := snap.Split(w.pending)
	if !ok {
		return errNoPrefix
	}
	// Before any read that counts (the early reads are read again when this fails).
	if err := capture.LockTables(ctx, snap.Tx, w.locks); err != nil {
		return err
	}
	// The snapshot reflects every commit before the first one it does not show: every
	// earlier commit was received before it, and is shown or was published before. With
	// nothing left unshown, it reflects everything the server decoded. The slot is told a
	// position strictly before the first unshown commit, which it must send again.
	pos, confirm := through, through
	if len(rest) > 0 {
		pos, confirm = rest[0].CommitLSN, rest[0].CommitLSN-1
	}
	pos = max(pos, s.position)
	commitTime := snap.Time
	if len(shown) > 0 {
		commitTime = shown[len(shown)-1].CommitTime
	}

	// What each view must re-read.
	changes := map[*walView]*viewChanges{}
	for i, t := range shown {
		s.logOversize(t)
		// A view whose changes this cycle cannot map is re-read off the cycle
		// (wal_behind.go); one re-read so is left alone until it is current again.
		for _, v := range w.fullReads(t) {
			if _, queued := w.full[v.st]; !queued && v.st.failed == nil {
				w.fallBehind(v)
			}
		}
		for _, v := range w.touched(t) {
			if w.isBehind(v) {
				w.fallBehind(v)
			}
		}
		if i < readTo {
			continue // its changes were read while the rest was received
		}
		w.addChanges(changes, t, func(v *walView) bool {
			_, full := w.full[v.st]
			return full || w.isBehind(v)
		})
	}

	// The views' changed rows, read at once on connections of their own (wal_read.go).
	jobs := map[*walView]*readJob{}
	var order []*readJob
	for _, v := range w.views {
		st := v.st
		if _, full := w.full[st]; full || (changes[v] == nil && reads[v] == nil) || st.failed != nil || w.isBehind(v) {
			continue
		}
		j := &readJob{a: reads[v], ch: changes[v]}
		if j.a == nil {
			j.a = w.newMappedRead(v)
		}
		if j.ch == nil {
			j.ch = newViewChanges()
		}
		jobs[v] = j
		order = append(order, j)
	}
	if err := w.readJobs(ctx, snap, order); err != nil {
		return err
	}

	t := &txnOut{}
	src := source{lsn: pos.String(), time: commitTime}
	var readViews []*viewState
	for _, v := range w.views {
		st := v.st
		reason, full := w.full[st]
		switch {
		case full:
			if st.failed != nil && reason != fullRetry && reason != fullReconcile {
				continue // stopped: its retry reads it in full
			}
			if w.behind.inflight[st] {
				continue // read in the background now: read in full once that is published
			}
			// Read in full here, the view is current again.
			delete(w.behind.at, st)
			delete(w.behind.due, st)
			rewrite := st.cfg.RefreshMode == ModeRewrite && reason == fullReconcile
			prog := s.startProgress(st.cfg.Name, reason.phase())
			r, err := readView(ctx, snap.Tx, st, true, rewrite, src, s.cfg.maxBytes, headerBytes(st.cfg.Name), prog)
			prog.end()
			if isErr(err, ErrView) {
				s.failView(st, err, "snapshot")
				readViews = append(readViews, st)
				continue
			}
			if err != nil {
				return err
			}
			mode := record.ModeReconcile
			switch {
			case rewrite:
				mode = record.ModeRewrite
			case st.epoch == 0 && len(st.hashes) == 0:
				mode = record.ModeSnapshot
			}
			if reason == fullWarm {
				s.warmOut(t, r)
			} else {
				s.epochOut(t, r, mode)
			}
			readViews = append(readViews, st)
			wasFailed := st.failed != nil
			t.done = append(t.done, func() {
				v.lastFull = time.Now()
				if wasFailed {
					st.ok()
					st.retryAt = time.Time{}
					s.resumeView(st)
				}
			})
			if reason != fullStartup && reason != fullWarm {
				s.m.rereads.WithLabelValues(s.cfg.Topic, st.cfg.Name, reason.String()).Inc()
			} else if len(v.deps.Unmapped) > 0 {
				// What a change of an unmapped table costs this view: a read like this one,
				// off the stream's path.
				for _, tb := range v.deps.Tables {
					if why, ok := v.deps.Unmapped[tb.OID]; ok {
						s.log.Warn("a change of this table re-reads the whole view, in the background: the view follows the stream at its own position meanwhile",
							"stream", s.cfg.Topic, "view", st.cfg.Name, "table", tb.String(), "reason", why, "full_read", time.Since(r.started).Round(time.Millisecond), "rows", r.rows)
					}
				}
			}
		case jobs[v] != nil:
			j := jobs[v]
			if errors.Is(j.err, errBulk) {
				b := w.bulkOut(ctx, snap.Tx, v, src, t)
				defer b.close() // before the snapshot ends (runCycle)
				continue
			}
			if j.err != nil {
				s.failView(st, j.err, "changes") // readJobs returned any other error
				continue
			}
			w.mappedOut(j.a, src, t)
		}
	}
	if err := w.startRereads(ctx, snap, pos, commitTime); err != nil {
		return err
	}
	w.positionOf(t, pos, commitTime)
	read := time.Now()
	if err := s.publishTxn(ctx, t); err != nil {
		var ve *ViewError
		if errors.As(err, &ve) && s.views[ve.View] != nil && s.views[ve.View].failed == nil {
			// A streamed read (wal_bulk.go) met a row that stops its view: the
			// transaction was aborted, nothing of it is read.
			s.failView(s.views[ve.View], err, "changes")
			return fmt.Errorf("%w: %w", errCycleAgain, err)
		}
		return err
	}
	if s.log.Enabled(ctx, slog.LevelDebug) {
		s.log.Debug("cycle", "stream", s.cfg.Topic, "txns", len(shown), "commit_age", start.Sub(commitTime), "done_age", time.Since(commitTime), "take", taken.Sub(start), "early_reads", early, "early_txns", readTo, "read", read.Sub(taken), "publish", time.Since(read), "position", pos)
	}
	for _, st := range readViews {
		delete(w.full, st)
	}
	w.answer(nil, readViews...)
	// A copy: rest shares its array with the published transactions, whose changes (88 B
	// a row, a million for one large UPDATE) it would keep alive until the next cycle.
	w.pending = nil
	if len(rest) > 0 {
		w.pending = append([]*capture.Txn(nil), rest...)
	}
	w.published(pos, confirm)
	s.m.cycleTime.WithLabelValues(s.cfg.Topic).Observe(time.Since(start).Seconds())
	s.m.captureLag.WithLabelValues(s.cfg.Topic).Set(max(0, time.Since(commitTime).Seconds()))
	s.m.cycleTxns.WithLabelValues(s.cfg.Topic).Add(float64(len(shown)))
	return nil
}

// earlyTxns is how many received transactions make a cycle start re-reading while the
// rest of what its snapshot shows is still being received: a backlog's reads overlap its
// receipt, while a live cycle, whose few transactions are there at once, reads once.
const earlyTxns = 64

// flushWait is how long a cycle waits for the slot to reach its snapshot's position before
// it makes the server flush its WAL (capture.FlushWAL), when that position was not flushed
// as the snapshot was taken: the WAL writer does not flush WAL that no commit follows, so
// on a database that went quiet the wait could last until the next commit or checkpoint.
// A live cycle's transactions are received within a few milliseconds.
const flushWait = 10 * time.Millisecond

// takeReading receives into w.pending the transactions up to the snapshot's position and
// returns the position decoded through. While a backlog comes in, the rows that the
// received transactions the snapshot shows changed in the mapped views are read at once,
// into reads: the changes of w.pending[:readTo] are in reads; early counts those rounds.
// Only transactions the snapshot shows are read for, in commit order up to the first it
// does not show: they are the cycle's (or, when a later one shows, the cycle is taken
// again with new reads), and a row read in the snapshot is its state for the whole cycle.
func (w *walSession) takeReading(ctx context.Context, snap *capture.Snapshot, reads map[*walView]*mappedRead) (through capture.LSN, readTo, early int, err error) {
	next, stop := 0, false
	full := map[*walView]bool{} // views some transaction makes read in full: not read early
	flushed := snap.Flush >= snap.Insert
	for {
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if !flushed {
			wctx, cancel = context.WithTimeout(ctx, flushWait)
		}
		txns, got, done, err := w.recv.TakeSome(wctx, snap.Insert, earlyTxns)
		cancel()
		if err != nil && !flushed && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			flushed = true
			w.flushWAL(ctx)
			continue
		}
		if err != nil {
			return 0, 0, early, err
		}
		w.pending = append(w.pending, txns...)
		if done {
			return got, next, early, nil
		}
		changes := map[*walView]*viewChanges{}
		for ; !stop && next < len(w.pending); next++ {
			t := w.pending[next]
			if !snap.Visible(t.Xid) {
				stop = true
				break
			}
			for _, v := range w.fullReads(t) {
				full[v] = true
			}
			w.addChanges(changes, t, func(v *walView) bool {
				_, queued := w.full[v.st]
				return queued || full[v] || v.st.failed != nil || w.isBehind(v)
			})
		}
		if len(changes) > 0 {
			early++
		}
		for v, ch := range changes {
			if full[v] {
				continue
			}
			a := reads[v]
			if a == nil {
				a = w.newMappedRead(v)
				reads[v] = a
			}
			if err := a.read(ctx, capture.TxRunner{Tx: snap.Tx}, ch); err != nil && !isErr(err, ErrView) && !errors.Is(err, errBulk) {
				return 0, 0, early, err // a view's error fails only that view, in the cycle; errBulk reads it whole
			}
		}
	}
}

// addChanges adds t's changes to the views that read their tables, but those skip names.
func (w *walSession) addChanges(changes map[*walView]*viewChanges, t *capture.Txn, skip func(*walView) bool) {
	for _, c := range t.Changes {
		for _, v := range w.tables[c.Rel] {
			if skip(v) {
				continue
			}
			ch := changes[v]
			if ch == nil {
				ch = newViewChanges()
				changes[v] = ch
			}
			ch.add(v, c)
		}
	}
}

// fullReads lists the views that t's changes make re-read in full: a change of a table the
// view cannot map, a change whose identity pgoutput did not send, a truncate.
func (w *walSession) fullReads(t *capture.Txn) []*walView {
	var out []*walView
	add := func(v *walView) {
		if !hasView(viewsOf(out), v.st) {
			out = append(out, v)
		}
	}
	for _, c := range t.Changes {
		for _, v := range w.tables[c.Rel] {
			if c.Unknown || v.deps.Maps[c.Rel] == nil || v.readsMissing(c) || v.readsOversize(c) {
				add(v)
			}
		}
	}
	for _, rel := range t.Truncated {
		for _, v := range w.tables[rel] {
			add(v)
		}
	}
	return out
}

// touched lists the views that read a table t changed or truncated.
func (w *walSession) touched(t *capture.Txn) []*walView {
	var out []*walView
	seen := map[uint32]bool{}
	add := func(rel uint32) {
		if seen[rel] {
			return
		}
		seen[rel] = true
		for _, v := range w.tables[rel] {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	for _, c := range t.Changes {
		add(c.Rel)
	}
	for _, rel := range t.Truncated {
		add(rel)
	}
	return out
}

func viewsOf(vs []*walView) []*viewState {
	out := make([]*viewState, len(vs))
	for i, v := range vs {
		out[i] = v.st
	}
	return out
}

// positionOf ends t with a position record at pos.
func (w *walSession) positionOf(t *txnOut, pos capture.LSN, at time.Time) {
	t.pos = record.Position{LSN: pos.String(), Time: at, Stale: w.s.staleViews(), Behind: w.behindViews()}
}

// published records that the stream reflects every commit up to pos, acknowledged by the
// broker: the stream's position moves, and the slot may release the WAL before confirm.
func (w *walSession) published(pos, confirm capture.LSN) {
	s := w.s
	if pos > s.position {
		s.position = pos
		s.m.position.WithLabelValues(s.cfg.Topic).Set(float64(pos))
		s.setPosition(pos.String())
	}
	w.recv.Confirm(confirm)
}
