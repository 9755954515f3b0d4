package distributor

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/statecast/statecast/distributor/internal/capture"
	"github.com/statecast/statecast/schemas/record"
)

// A view whose changes a cycle cannot map (a table no mapping reaches, a change whose
// values pgoutput did not send, a truncate) is re-read in full — and a full read of a
// large or costly view takes far longer than a cycle. So it is not read in the cycle:
// the cycle exports its snapshot, a goroutine of the view reads the view in it on a
// connection of its own, and the publisher loop publishes the result as a source
// transaction of its own when it comes. Meanwhile the stream goes on: its cycles publish
// the other views at their own pace and skip this one, which follows the stream at a
// position of its own — the position of the snapshot its last publication was read in —
// named in every position record (record.Position.Behind) until the view is current
// again. A client that waits for a position (WaitFor) waits for the views it holds, so a
// read-your-writes wait on such a view lasts as long as its re-read; one on the others
// does not.
//
// What each view then guarantees: a behind view is whole and consistent at its own
// position (its publication is one epoch of one snapshot), in commit order, and catches
// up with the stream once its tables stop changing for one re-read; source transactions
// that touched it and other views are applied to the others first and to it later, so a
// Cut shows it at its own, earlier position.
//
// One background read runs at a time in a stream (maxRereads). Changes that reach a view while its re-read runs
// (the cycles after its snapshot) make it dirty: another re-read follows, at most once
// per RereadDebounce. A start-up, reconcile or retry read stays in the cycle (it must not
// run beside a background one: the view's state has one writer at a time, the publisher
// loop, and a background read only reads it while the cycles leave the view alone).

// reread is a background full read of one view in a snapshot a cycle exported.
type reread struct {
	v    *walView
	snap *capture.Snapshot
	conn *pgxpool.Conn // snap's, released once it is closed
	at   capture.LSN   // the snapshot's position
	src  source
	r    *viewRead
	err  error
	took time.Duration
}

// behindState is what the session knows of its views that follow the stream at a
// position of their own.
type behindState struct {
	at       map[*viewState]capture.LSN // behind views, at the position their rows reflect
	inflight map[*viewState]bool        // a background read runs
	dirty    map[*viewState]bool        // changed since the running read's snapshot
	due      map[*viewState]bool        // to re-read (once RereadDebounce allows)
	done     chan *reread
}

func newBehindState(views int) behindState {
	return behindState{at: map[*viewState]capture.LSN{}, inflight: map[*viewState]bool{}, dirty: map[*viewState]bool{},
		due: map[*viewState]bool{}, done: make(chan *reread, views)}
}

// isBehind reports whether the cycles leave v alone: it is behind the stream (re-read in
// the background, or waiting for one).
func (w *walSession) isBehind(v *walView) bool {
	_, ok := w.behind.at[v.st]
	return ok
}

// fallBehind records that v's changes of the current cycle are left to a background
// re-read: the view stays at the stream's position before the cycle.
func (w *walSession) fallBehind(v *walView) {
	st := v.st
	if _, ok := w.behind.at[st]; !ok {
		w.behind.at[st] = w.s.position
	}
	if w.behind.inflight[st] {
		w.behind.dirty[st] = true
		return
	}
	w.behind.due[st] = true
}

// nextReread is when the first due re-read may start (RereadDebounce after its view's
// last full read).
func (w *walSession) nextReread() (time.Time, bool) {
	var at time.Time
	for _, v := range w.views {
		if !w.behind.due[v.st] || w.behind.inflight[v.st] {
			continue
		}
		t := v.lastFull.Add(w.s.cfg.RereadDebounce)
		if at.IsZero() || t.Before(at) {
			at = t
		}
	}
	return at, !at.IsZero()
}

// maxRereads is how many background reads a stream runs at once: the pool holds a
// connection for one (Config.poolConns); a view due while another reads waits for a
// later cycle, at its own position meanwhile.
const maxRereads = 1

// startRereads starts the background reads of the due views that RereadDebounce allows,
// in snap (at pos): exported once, imported by each on a connection of its own, when one
// is free (stream.tryConn).
func (w *walSession) startRereads(ctx context.Context, snap *capture.Snapshot, pos capture.LSN, commitTime time.Time) error {
	now := time.Now()
	var name string
	for _, v := range w.views {
		st := v.st
		if len(w.behind.inflight) >= maxRereads {
			break
		}
		if !w.behind.due[st] || w.behind.inflight[st] || st.failed != nil || now.Before(v.lastFull.Add(w.s.cfg.RereadDebounce)) {
			continue
		}
		if name == "" {
			var err error
			if name, err = snap.Export(ctx); err != nil {
				return err
			}
		}
		conn, ok := w.s.tryConn(ctx)
		if !ok {
			break
		}
		imported, err := capture.ImportSnapshot(ctx, conn, name, pos)
		if err != nil {
			conn.Release()
			return err
		}
		delete(w.behind.due, st)
		w.behind.inflight[st] = true
		rr := &reread{v: v, snap: imported, conn: conn, at: pos, src: source{lsn: pos.String(), time: commitTime}}
		w.bg.Go(func() { w.runReread(ctx, rr) })
	}
	return nil
}

// runReread is the goroutine of one background read: it reads rr's view in its snapshot
// and hands the result to the publisher loop.
func (w *walSession) runReread(ctx context.Context, rr *reread) {
	s := w.s
	st := rr.v.st
	start := time.Now()
	// The read outlives the cycle that exported its snapshot, and with it that cycle's
	// locks: it takes its own, and is given up (and started again by a later cycle) when a
	// table was truncated since the snapshot (capture.LockTables). Here, not in the cycle: a
	// TRUNCATE waiting for the cycle's locks queues these behind it.
	rr.err = capture.LockTables(ctx, rr.snap.Tx, rr.v.deps.Tables)
	if rr.err == nil {
		prog := s.startProgress(st.cfg.Name, fullUnmapped.phase())
		rr.r, rr.err = readView(ctx, rr.snap.Tx, st, true, false, rr.src, s.cfg.maxBytes, headerBytes(st.cfg.Name), prog)
		prog.end()
	}
	rr.snap.Close(context.WithoutCancel(ctx))
	rr.conn.Release()
	rr.took = time.Since(start)
	select {
	case w.behind.done <- rr:
	case <-ctx.Done():
	}
}

// publishRereads publishes the background reads that are done, each as a source
// transaction of its own: the view's epoch and a position record at the stream's
// position, with the views still behind.
func (w *walSession) publishRereads(ctx context.Context) error {
	for {
		select {
		case rr := <-w.behind.done:
			if err := w.publishReread(ctx, rr); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

func (w *walSession) publishReread(ctx context.Context, rr *reread) error {
	s := w.s
	v, st := rr.v, rr.v.st
	delete(w.behind.inflight, st)
	dirty := w.behind.dirty[st]
	delete(w.behind.dirty, st)
	v.lastFull = time.Now()
	switch {
	case isErr(rr.err, ErrView):
		s.failView(st, rr.err, "snapshot")
		delete(w.behind.at, st) // a stopped view is stale, not behind
		return nil
	case rr.err != nil && !errors.Is(rr.err, context.Canceled):
		s.log.Warn("background re-read failed; retrying", "stream", s.cfg.Topic, "view", st.cfg.Name, "err", rr.err)
		w.behind.due[st] = true
		return nil
	case rr.err != nil:
		return rr.err
	}
	if dirty {
		w.behind.at[st] = rr.at
		w.behind.due[st] = true
	} else {
		delete(w.behind.at, st)
	}
	t := &txnOut{}
	s.epochOut(t, rr.r, record.ModeReconcile)
	w.positionOf(t, s.position, rr.src.time)
	if err := s.publishTxn(ctx, t); err != nil {
		return err
	}
	s.m.rereads.WithLabelValues(s.cfg.Topic, st.cfg.Name, fullUnmapped.String()).Inc()
	s.log.Debug("background re-read published", "stream", s.cfg.Topic, "view", st.cfg.Name, "position", rr.at, "took", rr.took, "behind", dirty)
	return nil
}

// behindViews is the Behind of a position record: each behind view's position.
func (w *walSession) behindViews() map[string]string {
	if len(w.behind.at) == 0 {
		return nil
	}
	out := make(map[string]string, len(w.behind.at))
	for st, at := range w.behind.at {
		if st.failed == nil {
			out[st.cfg.Name] = at.String()
		}
	}
	return out
}
