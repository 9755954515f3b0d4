package distributor

import (
	"context"
	"time"

	"github.com/statecast/statecast/distributor/internal/capture"
)

// staleWAL decides when an idle stream makes the server flush its WAL. PostgreSQL sends a
// slot only flushed WAL, and its WAL writer leaves unflushed the WAL that no commit
// follows (a reader's page pruning, a non-transactional logical message) — on an idle
// server, whose WAL writer hibernates, for seconds. A reader's source position taken with
// pg_current_wal_insert_lsn() after its COMMIT may lie past such WAL, and would then not
// become current until the next commit elsewhere. So an idle stream reads the server's
// WAL positions every staleWALEvery, and when WAL inserted before the previous reading is
// still not flushed, it has the server flush it (capture.FlushWAL). staleWALEvery is above
// the WAL writer's own delay (wal_writer_delay, 200 ms by default): a server that is not
// idle flushes such WAL itself first, and is not asked to.
type staleWAL struct {
	read     time.Time   // when the positions were last read
	inserted capture.LSN // the insert position then
}

const staleWALEvery = 250 * time.Millisecond

// due reports whether the positions are to be read at now.
func (s *staleWAL) due(now time.Time) bool { return now.Sub(s.read) >= staleWALEvery }

// observe records the positions read at now and reports whether WAL inserted before the
// previous reading is still unflushed: then the server is to flush it.
func (s *staleWAL) observe(now time.Time, insert, flush capture.LSN) bool {
	stale := !s.read.IsZero() && s.inserted > flush
	s.read, s.inserted = now, insert
	return stale
}

// flushStale reads the server's WAL positions when due and has the server flush WAL left
// unflushed since the previous reading (staleWAL). The slot then streams it, and the next
// idle position record is past it.
func (w *walSession) flushStale(ctx context.Context) {
	now := time.Now()
	if !w.stale.due(now) {
		return
	}
	insert, flush, err := capture.WALPositions(ctx, w.s.pool)
	if err != nil {
		// The database unreachable: the receiver and the next cycle say so.
		w.s.log.Debug("WAL positions", "stream", w.s.cfg.Topic, "err", err)
		return
	}
	if w.stale.observe(now, insert, flush) && w.flushWAL(ctx) {
		w.s.log.Debug("unflushed WAL flushed", "stream", w.s.cfg.Topic, "insert", insert, "flush", flush)
	}
}

// flushWAL has the server flush its WAL (capture.FlushWAL) and reports whether it did.
// Bounded: with the pool's connections all taken, the stream waits as it would without
// the flush rather than for a connection.
func (w *walSession) flushWAL(ctx context.Context) bool {
	fctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := capture.FlushWAL(fctx, w.s.pool); err != nil {
		if ctx.Err() == nil {
			w.s.log.Warn("WAL flush failed; waiting for the server's own", "stream", w.s.cfg.Topic, "err", err)
		}
		return false
	}
	return true
}
