package distributor

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/statecast/statecast/distributor/internal/capture"
	"github.com/statecast/statecast/schemas/record"
)

// What a session reads in full at its start. The topic holds every view as of the
// stream's position (restore.go), and an existing slot re-sends every commit after its
// confirmed position, which is never past the stream's: the broker acknowledged a cycle
// before the slot was told its position. So the session's cycles re-read the rows those
// commits touched, and a view whose rows in the topic are its rows at the stream's
// position needs no full read: re-reading a row the topic already holds publishes nothing
// (its content hash is unchanged), which makes the commits re-sent after a kill between a
// cycle's Kafka commit and the slot's confirmation harmless.
//
// A view is read in full (a reconcile epoch, or a snapshot on an empty topic) when that
// does not hold or cannot be known:
//
//   - the slot is new (first start, or lost: what changed meanwhile was not streamed);
//   - the stream has no position yet, or the slot's confirmed position is past it (the
//     topic is older than the slot: a topic restored from a backup, or written by another
//     configuration; the commits in between would not be re-sent);
//   - the view has no complete epoch (none yet, or the last one's end is not in the topic);
//   - its definition (viewDef: SQL, key, tables, result columns, record encoding) is not
//     the one its last epoch recorded, or that epoch recorded none (an older version);
//   - the last position record names it stale (stopped: its rows are older than the
//     position) or behind (a background re-read that never published), or it was behind
//     when the previous session of this activation ended;
//   - its query cannot be described now (its read then stops it with the error).
//
// A view that needs no full read but has reverse maps (wal_view.go's depMap: mappings
// through other columns than its key) needs them to find the rows a change makes leave,
// and they are not in the topic: it is read in full in the first cycle's snapshot as a
// "warm" read, which publishes only the rows that differ from the topic, as ordinary rows
// of its current epoch, and no epoch frame (fullWarm). Within an activation the maps are
// kept across sessions while the analysis gives the same ones.

// startReads queues the full reads of the session's first cycle (w.full) and compiles
// the encoder of every other view. slotStart is the slot's confirmed position, newSlot
// whether the slot was created for this session.
func (w *walSession) startReads(ctx context.Context, slotStart capture.LSN, newSlot bool) error {
	s := w.s
	var why string
	switch {
	case newSlot:
		why = "new replication slot"
	case s.position == 0:
		why = "no source position in the topic"
	case slotStart > s.position:
		why = fmt.Sprintf("the slot's confirmed position %s is past the topic's %s", slotStart, s.position)
	}
	if why != "" {
		for _, v := range w.views {
			if v.st.failed == nil { // a stopped view's retry reads it
				w.full[v.st] = fullStartup
			}
		}
		s.log.Info("every view read in full at the session's start", "stream", s.cfg.Topic, "reason", why)
		return nil
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("distributor: describe views: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	for _, v := range w.views {
		st := v.st
		if st.failed != nil {
			continue // its retry reads it
		}
		why, err := w.needsFullRead(ctx, tx, v)
		if err != nil {
			return err
		}
		switch {
		case why != "":
			w.full[st] = fullStartup
			s.log.Info("view read in full at the session's start", "stream", s.cfg.Topic, "view", st.cfg.Name, "reason", why)
		case len(st.depSpecs) > 0 && st.deps == nil:
			w.full[st] = fullWarm
			s.log.Info("view continues from the slot; read once to rebuild its reverse maps (publishes only what differs, no epoch)",
				"stream", s.cfg.Topic, "view", st.cfg.Name, "epoch", st.epoch)
		default:
			s.log.Info("view continues from the slot, without a full read", "stream", s.cfg.Topic, "view", st.cfg.Name, "epoch", st.epoch)
		}
	}
	return nil
}

// needsFullRead says why v must be read in full at a session's start with an existing
// slot, or "" when it need not; it compiles v's encoder.
func (w *walSession) needsFullRead(ctx context.Context, tx pgx.Tx, v *walView) (string, error) {
	st := v.st
	switch {
	case st.ended == 0 || st.epoch > st.ended:
		return "no complete epoch in the topic", nil
	case w.s.mustRead[st.cfg.Name] != "":
		return w.s.mustRead[st.cfg.Name], nil
	case st.def == "":
		return "definition unknown (its last epoch recorded none)", nil
	}
	enc, err := compileEncoder(ctx, tx, st.cfg, st.cfg.SQL)
	if isErr(err, ErrView) {
		return "its query cannot be described: " + err.Error(), nil
	}
	if err != nil {
		return "", err
	}
	st.enc = enc
	if def := viewDef(st, enc); def != st.def {
		return fmt.Sprintf("definition changed (%s, was %s)", def, st.def), nil
	}
	return "", nil
}

// warmOut adds r, a full read of a view that a session continues without an epoch (a
// warm read: fullWarm), to t: the rows whose content differs from the topic's and the
// tombstones of the keys gone, as rows of the view's current epoch. The view's hashes and
// reverse maps become the read's in done.
func (s *stream) warmOut(t *txnOut, r *viewRead) {
	st := r.view
	name := st.cfg.Name
	if len(r.publish) > 0 {
		meta := record.Meta{View: name, Epoch: st.epoch, SourceTime: r.src.time, SourceLSN: r.src.lsn}
		t.body = append(t.body, rowsPart(r.publish, meta))
	}
	published := r.published()
	t.done = append(t.done, func() {
		st.hashes = r.hashes
		st.deps = r.deps
		s.setViewStatus(st)
		s.m.rows.WithLabelValues(s.cfg.Topic, name).Add(float64(published))
		s.m.tombstones.WithLabelValues(s.cfg.Topic, name).Add(float64(r.tombs))
		s.log.Info("view read at the session's start: reverse maps rebuilt", "stream", s.cfg.Topic, "view", name,
			"rows", r.rows, "published", published, "tombstones", r.tombs, "source_lsn", r.src.lsn)
	})
}

// carryBehind records, when the session ends, the views that were behind the stream:
// their rows in the topic are older than its position, so the next session reads them in
// full. The views read in full by the session's first cycle are current: no longer noted.
func (w *walSession) carryBehind(firstDone bool) {
	s := w.s
	if firstDone {
		for _, v := range w.views {
			if _, queued := w.full[v.st]; !queued {
				delete(s.mustRead, v.st.cfg.Name)
			}
		}
	}
	for st := range w.behind.at {
		s.mustRead[st.cfg.Name] = "behind the stream when the previous session ended"
	}
}
